# Sourced by the scripts that build binaries from the Go module proxy: one
# cache folder outside the checkout, shared by every clone on the machine, one
# build at a time per folder, and progress on stderr.
#
# OPERADOR_CACHE moves the cache (default ~/.cache/operador-promociones).

tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tools
cache=${OPERADOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operador-promociones}

version() { # module path, tools module -> the version that module pins
	(cd "$tools/$2" && go list -m -f '{{.Version}}' "$1")
}

# open_cache NAME [MODULE...]: make $dir the cache folder NAME and hold its lock
# until the script exits; a second caller waits, then finds the binaries. The
# folder's name ends in a digest of the tools modules MODULE... (their go.mod and
# go.sum), so that binaries built from other dependencies are not taken for them.
open_cache() {
	local name=$1
	shift
	[ $# = 0 ] || name+=-$(cd "$tools" && for m in "$@"; do cat "$m/go.mod" "$m/go.sum"; done | sha256sum | cut -c1-8)
	dir=$cache/bin/$name
	# hack/tools-aligned.sh lists what the builds would compile: nothing is built.
	[ -z "${TOOLS_DEPS:-}" ] || return 0
	mkdir -p "$dir"
	exec 9>"$dir/.lock"
	flock 9
}

# list_deps MODULE [go build flags...] -- PACKAGE...: append to $TOOLS_DEPS the
# modules whose packages PACKAGE's build compiles, one line each: path, version
# (its replacement's, where replaced) and MODULE.
list_deps() {
	local module=$1 flags=()
	shift
	while [ "$1" != -- ]; do flags+=("$1"); shift; done
	shift
	(cd "$tools/$module" && CGO_ENABLED=${CGO_ENABLED:-0} go list -deps "${flags[@]}" \
		-f '{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}' "$@") |
		sort -u | sed -n "/./s|$| $module|p" >>"$TOOLS_DEPS"
}

# build MODULE PACKAGE NAME [go build flags...]: build PACKAGE with the tools
# module MODULE into $dir/NAME, unless it is there. CGO_ENABLED defaults to 0.
# Without the symbol table and DWARF (-s -w): kube-apiserver links in 12 s
# instead of 18 and takes 119 MB instead of 170, and a panic still prints its
# stack.
build() {
	local module=$1 pkg=$2 name=$3
	shift 3
	if [ -n "${TOOLS_DEPS:-}" ]; then list_deps "$module" "$@" -- "$pkg"; return; fi
	[ -x "$dir/$name" ] && return 0
	echo "building $name into $dir (the first build takes minutes; later runs reuse it)" >&2
	# A temporary name, then a rename: an interrupted build never leaves a
	# half-written binary that a later run would trust.
	(cd "$tools/$module" && CGO_ENABLED=${CGO_ENABLED:-0} go build -trimpath -ldflags='-s -w' "$@" -o "$dir/.$name.tmp" "$pkg") ||
		{ echo "building $name failed" >&2; return 1; }
	mv "$dir/.$name.tmp" "$dir/$name"
}

# build_all MODULE [go build flags...] -- PACKAGE...: build the commands
# PACKAGE... of the tools module MODULE that are not yet in $dir, each named
# as its package's last element, in one go build: their compiles and their
# links (each on one core) then run side by side.
build_all() {
	local module=$1 flags=() pkgs=() p
	shift
	while [ "$1" != -- ]; do flags+=("$1"); shift; done
	shift
	if [ -n "${TOOLS_DEPS:-}" ]; then list_deps "$module" "${flags[@]}" -- "$@"; return; fi
	for p in "$@"; do [ -x "$dir/${p##*/}" ] || pkgs+=("$p"); done
	[ ${#pkgs[@]} = 0 ] && return 0
	echo "building ${pkgs[*]##*/} into $dir (the first build takes minutes; later runs reuse it)" >&2
	# A folder of its own, then a rename of each: an interrupted build never
	# leaves a half-written binary that a later run would trust.
	local tmp="$dir/.build_all.tmp"
	rm -rf "$tmp" && mkdir "$tmp"
	(cd "$tools/$module" && CGO_ENABLED=${CGO_ENABLED:-0} go build -trimpath -ldflags='-s -w' "${flags[@]}" -o "$tmp/" "${pkgs[@]}") ||
		{ echo "building ${pkgs[*]##*/} failed" >&2; return 1; }
	for p in "${pkgs[@]}"; do mv "$tmp/${p##*/}" "$dir/${p##*/}"; done
	rmdir "$tmp"
}
