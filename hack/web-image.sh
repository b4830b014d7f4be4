#!/usr/bin/env bash
# Prints the path of the image tarball localhost/nginx-unprivileged:debian, a
# local stand-in for the operator's default web image
# (docker.io/nginxinc/nginx-unprivileged), which cannot be pulled here. It is
# Debian's nginx, with the libraries it links, run the way nginx-unprivileged
# runs: as uid 101, on port 8080, serving /usr/share/nginx/html, writing only
# to /tmp (web-image.conf), stopped with SIGQUIT, with busybox's sh, wget and
# grep as the public image's alpine variant has them (the Helm chart's test Pod
# uses them). Built offline from Debian's
# packages (apt-get download; nothing is installed) by hack/image, and cached
# like the binaries, keyed by the nginx package's version.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

ver=$(apt-cache policy nginx 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
	apt-get update >/dev/null
	ver=$(apt-cache policy nginx | awk '/Candidate:/ {print $2}')
fi
open_cache images
# Keyed by nginx's version and by this recipe, so that a change to either rebuilds it.
recipe=$(cat "$here/web-image.sh" "$here/web-image.conf" "$here"/image/*.go | sha256sum | cut -c1-12)
out=$dir/nginx-unprivileged-debian-${ver//[^A-Za-z0-9.-]/_}-$recipe.tar
if [ -f "$out" ]; then echo "$out"; exit 0; fi
echo "building the web image localhost/nginx-unprivileged:debian (nginx $ver) into $dir" >&2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download nginx nginx-common libc6 libcrypt1 libpcre2-8-0 libssl3 zlib1g busybox-static) >"$work/apt.log" 2>&1 ||
	{ cat "$work/apt.log" >&2; exit 1; }
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/pkgs"; done

root=$work/rootfs
mkdir -p "$root/usr/sbin" "$root/etc/nginx" "$root/usr/share/nginx/html" "$root/tmp" "$root/var/log/nginx"
chmod 1777 "$root/tmp" # as in the public image: nginx writes there even without the operator's emptyDir
cp "$work/pkgs/usr/sbin/nginx" "$root/usr/sbin/nginx"
# The libraries nginx links, and the dynamic loader, at the paths it asks for,
# taken from the packages downloaded above.
ldd "$work/pkgs/usr/sbin/nginx" | awk '/=> \// {print $3} /^\t\// {print $1}' | while read -r lib; do
	found=$(find "$work/pkgs" -name "$(basename "$lib")" | head -n 1)
	[ -n "$found" ] || { echo "no $(basename "$lib") in the downloaded packages" >&2; exit 1; }
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$found" "$root$lib"
done
cp "$work/pkgs/etc/nginx/mime.types" "$root/etc/nginx/"
# busybox, static, and the applets the alpine image's shell offers that a Pod may use.
mkdir -p "$root/bin" "$root/usr/bin"
cp "$work/pkgs/bin/busybox" "$root/bin/busybox"
for applet in /bin/sh /bin/grep /usr/bin/wget; do ln -s /bin/busybox "$root$applet"; done
cp "$here/web-image.conf" "$root/etc/nginx/nginx.conf"
echo '<!DOCTYPE html><title>nginx</title><p>The operator mounts the page here.' >"$root/usr/share/nginx/html/index.html"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnginx:x:101:101:nginx:/nonexistent:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnginx:x:101:\n' >"$root/etc/group"
# As in nginx-unprivileged: the logs go to the container's output.
ln -s /dev/stdout "$root/var/log/nginx/access.log"
ln -s /dev/stderr "$root/var/log/nginx/error.log"

go -C "$here/image" run . dir -o "$out" -tag localhost/nginx-unprivileged:debian \
	-user 101 -cmd '["/usr/sbin/nginx","-g","daemon off;"]' -port 8080 -stop-signal SIGQUIT "$root" >&2
echo "$out"
