# The real node of hack/cluster.sh, sourced by it: containerd, runc, the kubelet
# and kube-proxy, in namespaces of their own, so that Pods run real processes.
#
# Everything the node touches is its own and goes when it goes:
# - a network namespace, joined to this machine by a veth pair on a /30 of
#   10.201.0.0/16 chosen from the API server's port. The kubelet listens on the
#   node's end; forward (hack/image/forward) on the host's end takes the node's
#   connections to the API server, which listens on loopback only. The pods'
#   bridge, their addresses (10.244.0.0/24) and every netfilter rule
#   (kube-proxy, the kubelet, the CNI bridge) live inside, and vanish with the
#   namespace.
# - a mount namespace, where /var/lib and /var/log are folders of the cluster
#   and /run is a tmpfs: containerd, the kubelet and the pods' mounts use their
#   usual paths, and none of their mounts reaches this machine's.
# - a PID namespace, whose first process (pause) reaps orphans. Killing it
#   kills every process of the node, containerd's shims and the containers too.
# - cgroups under /operador-<port> in each cgroup v1 hierarchy, removed on down.
# - the registry, the meeting point of the lesson's Step 4: the CNCF
#   Distribution registry, listening on the host's end of the link only (so
#   only this machine and the node reach it), with TLS under the lesson's name,
#   registry.iximiuz.com (a certificate from the cluster's CA), and basic auth
#   (htpasswd; the user and password in registry/credentials). The name
#   resolves to it in the node's mount namespace alone (its own /etc/hosts),
#   and the node's containerd trusts the cluster's CA for it (certs.d). The
#   image is pulled by its own name, never through a mirror: containerd does
#   not send a Pod's imagePullSecrets to a mirror.
# - a second, anonymous registry that containerd is told serves docker.io: it
#   holds the stand-in for the default web image under that image's own name,
#   so that the operator's defaults work here, and no pull leaves the machine.
#
# The kubelet sets six machine-wide kernel tunables when they differ from what
# it wants (vm.overcommit_memory, kernel.panic, ...). Inside the node's mount
# namespace it reads them from files holding its own values, so it writes none
# of this machine's settings.

node_name=node-real
node_dir=$dir/node
pod_cidr=10.244.0.0/24
node_link=$((api_port % 16384)) # one /30 per port: two clusters side by side get two
host_ip=10.201.$((node_link / 64)).$((node_link % 64 * 4 + 1))
node_ip=10.201.$((node_link / 64)).$((node_link % 64 * 4 + 2))
node_veth=opn$api_port
cgroup_root=operador-$api_port
registry_host=registry.iximiuz.com # the lesson's: deploy.yaml's image names it
registry_addr=$host_ip:443
mirror_addr=$host_ip:5443 # docker.io, for the node

node_holder() { # the node's PID 1, as this machine sees it
	local unshare
	unshare=$(cat "$dir/pids/node" 2>/dev/null) || return 1
	cat "/proc/$unshare/task/$unshare/children" 2>/dev/null | awk '{print $1}' | grep .
}

# in_node CMD...: run CMD in the node's mount, network and PID namespaces.
in_node() {
	nsenter --target "$(node_holder)" --mount --net --pid -- "$@"
}

node_check() {
	[ "$(id -u)" = 0 ] || { say "a real node needs root (or CLUSTER_NODE=none for kwok nodes only)"; exit 1; }
	"$root/hack/debian-packages.sh" node
	[ -d /sys/fs/cgroup/memory ] && [ -d /sys/fs/cgroup/cpu ] ||
		{ say "a real node needs the cgroup v1 hierarchies under /sys/fs/cgroup"; exit 1; }
	if ip -o addr show | grep -q " $host_ip/"; then
		say "$host_ip is already on a link of this machine (a cluster on port $api_port left behind?): hack/cluster.sh down"
		exit 1
	fi
}

# node_net_up: the node's namespaces and its link, before the API server,
# which listens on the host's end.
node_net_up() {
	say "starting the real node's namespaces ($node_name, $node_ip)"
	# A node whose namespaces died comes back as a new machine would: empty.
	rm -rf "$node_dir/var-lib" "$node_dir/var-log"
	mkdir -p "$node_dir/var-lib" "$node_dir/var-log" "$node_dir/sysctl" "$node_dir/cni" "$node_dir/pause-root"
	# pause: the node's PID 1 here, and each pod's sandbox in the image of node_up.
	go build -C "$root/hack/image" -o "$node_dir/pause-root/pause" ./pause
	go build -C "$root/hack/image" -o "$node_dir/forward" ./forward
	setsid unshare --mount --net --pid --fork --mount-proc --kill-child=SIGKILL "$node_dir/pause-root/pause" \
		>"$dir/logs/node.log" 2>&1 </dev/null &
	echo $! >"$dir/pids/node"
	for _ in $(seq 50); do node_holder >/dev/null && break; sleep 0.1; done
	local holder
	holder=$(node_holder) || fail node "its namespaces did not start"
	ip link add "$node_veth" type veth peer name eth0 netns "$holder"
	ip addr add "$host_ip/30" dev "$node_veth"
	ip link set "$node_veth" up
	in_node sh -ec "ip link set lo up; ip addr add $node_ip/30 dev eth0; ip link set eth0 up; ip route add default via $host_ip"
	# The node's own filesystem: see the top of this file.
	printf '127.0.0.1 localhost\n::1 localhost\n%s %s\n' "$host_ip" "$registry_host" >"$node_dir/hosts"
	local sysctls="vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000"
	in_node sh -ec '
		d=$1
		shift
		mount -n -t tmpfs -o mode=755 tmpfs /run
		mount -n --bind "$d/var-lib" /var/lib
		mount -n --bind "$d/var-log" /var/log
		mount -n --bind "$d/hosts" /etc/hosts
		for kv in "$@"; do
			f=$d/sysctl/$(echo "${kv%=*}" | tr / .)
			echo "${kv#*=}" >"$f"
			mount -n --bind "$f" "/proc/sys/${kv%=*}"
		done' sh "$node_dir" $sysctls
}

node_certificates() { # client and serving certificates of the kubelet and kube-proxy
	[ -f "$dir/pki/kube-proxy.crt" ] && return 0 # written last
	(
		cd "$dir/pki"
		umask 077
		openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$node_name" -keyout kubelet.key -out kubelet.csr
		openssl x509 -req -in kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out kubelet.crt
		openssl req -newkey rsa:2048 -nodes -subj "/CN=$node_name" -keyout kubelet-serving.key -out kubelet-serving.csr
		openssl x509 -req -in kubelet-serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out kubelet-serving.crt \
			-extfile <(echo "subjectAltName=IP:$node_ip")
		openssl req -newkey rsa:2048 -nodes -subj "/CN=system:kube-proxy" -keyout kube-proxy.key -out kube-proxy.csr
		openssl x509 -req -in kube-proxy.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out kube-proxy.crt
	) >>"$dir/logs/pki.log" 2>&1 || { say "making the node's certificates failed, see $dir/logs/pki.log"; exit 1; }
}

# registry_files: the registries' certificate (both serve it), the lesson
# registry's credentials, a random password made once per cluster, and the
# htpasswd line it checks them against.
registry_files() {
	mkdir -p "$dir/registry"
	if [ ! -f "$dir/pki/registry.crt" ]; then
		(
			cd "$dir/pki"
			umask 077
			openssl req -newkey rsa:2048 -nodes -subj "/CN=$registry_host" -keyout registry.key -out registry.csr
			openssl x509 -req -in registry.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out registry.crt \
				-extfile <(echo "subjectAltName=DNS:$registry_host,IP:$host_ip")
		) >>"$dir/logs/pki.log" 2>&1 || { say "making the registry's certificate failed, see $dir/logs/pki.log"; exit 1; }
	fi
	if [ ! -f "$dir/registry/htpasswd" ]; then
		(
			umask 077
			echo "tienda:$(openssl rand -hex 16)" >"$dir/registry/credentials"
			cut -d: -f2 "$dir/registry/credentials" | "$node_bin/htpasswd" tienda >"$dir/registry/htpasswd.new"
			mv "$dir/registry/htpasswd.new" "$dir/registry/htpasswd"
		)
	fi
	local name addr auth
	for name in registry mirror; do
		addr=$registry_addr auth="auth: {htpasswd: {realm: $registry_host, path: $dir/registry/htpasswd}}"
		if [ "$name" = mirror ]; then addr=$mirror_addr auth=""; fi
		same_or_write "$node_dir/$name.yml" <<EOF
version: 0.1
log: {level: info, formatter: text}
storage:
  filesystem: {rootdirectory: $dir/registry/$name-data}
http:
  addr: $addr
  tls: {certificate: $dir/pki/registry.crt, key: $dir/pki/registry.key}
$auth
EOF
	done
}

# registry_up: both registries, and the web image's stand-in in the mirror,
# under the default image's name (children.go's DefaultWebImage).
registry_up() {
	registry_files
	# A name of its own for the second, so that pid_of tells them apart.
	ln -sf "$node_bin/registry" "$node_dir/mirror"
	up_one registry || start registry env OTEL_TRACES_EXPORTER=none "$node_bin/registry" serve "$node_dir/registry.yml"
	up_one mirror || start mirror env OTEL_TRACES_EXPORTER=none "$node_dir/mirror" serve "$node_dir/mirror.yml"
	wait_for registry 30 curl -s -o /dev/null --cacert "$dir/pki/ca.crt" "https://$registry_addr/v2/"
	wait_for mirror 30 curl -sf -o /dev/null --cacert "$dir/pki/ca.crt" "https://$mirror_addr/v2/"
	local web
	web=$(sed -n 's/^\s*DefaultWebImage *= *"docker.io\/\(.*\)"$/\1/p' "$root/children.go")
	[ -n "$web" ] || { say "no docker.io DefaultWebImage in children.go"; exit 1; }
	push_image "$("$root/hack/web-image.sh")" "$mirror_addr/$web" >>"$dir/logs/images.log" 2>&1 ||
		{ say "pushing the web image's stand-in failed, see $dir/logs/images.log"; exit 1; }
}

# push_image TARBALL ADDRESS/REPOSITORY:TAG: push an image tarball of hack/image
# (an OCI layout inside: the whole index, its digest unchanged) with crane,
# trusting the cluster's CA, with the lesson registry's credentials when
# ADDRESS is its.
push_image() {
	local work rc=0 user pass
	work=$(mktemp -d)
	mkdir -p "$work/layout" "$work/docker"
	tar -xf "$1" -C "$work/layout"
	IFS=: read -r user pass <"$dir/registry/credentials"
	printf '{"auths": {"%s": {"auth": "%s"}}}\n' "${registry_addr%:443}" "$(printf '%s:%s' "$user" "$pass" | base64 -w0)" >"$work/docker/config.json"
	SSL_CERT_FILE=$dir/pki/ca.crt DOCKER_CONFIG=$work/docker go -C "$root/hack/image" tool crane push "$work/layout" "$2" || rc=$?
	rm -rf "$work"
	return $rc
}

# same_or_write FILE: write stdin to FILE, unless FILE holds it already (a
# running kube-proxy exits when its configuration file changes).
same_or_write() {
	local tmp=$1.new
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then rm "$tmp"; else mv "$tmp" "$1"; fi
}

node_config() {
	local p=$dir/pki
	write_kubeconfig "$node_dir/kubelet.kubeconfig" "$p/kubelet" "$host_ip"
	write_kubeconfig "$node_dir/kube-proxy.kubeconfig" "$p/kube-proxy" "$host_ip"
	same_or_write "$node_dir/containerd.toml" <<EOF
version = 3
# root and state keep their defaults, /var/lib/containerd and /run/containerd:
# in the node's mount namespace they are a folder of the cluster and a tmpfs.
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = "$node_dir/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node_dir/opt"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".registry]
    # Per registry: whom to trust, and who serves docker.io (see the top).
    config_path = "$node_dir/certs.d"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "localhost/pause:go"
[plugins."io.containerd.cri.v1.runtime"]
  # Root here lacks CAP_SYS_RESOURCE: no process may lower its oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$node_bin"]
    conf_dir = "$node_dir/cni"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
    BinaryName = "$node_bin/runc"
    SystemdCgroup = false
EOF
	mkdir -p "$node_dir/certs.d/$registry_host" "$node_dir/certs.d/docker.io"
	same_or_write "$node_dir/certs.d/$registry_host/hosts.toml" <<EOF
server = "https://$registry_host"
ca = "$dir/pki/ca.crt"
EOF
	# The server itself, not a mirror of it: a pull that the mirror cannot
	# serve fails here, rather than going on to the public registry.
	same_or_write "$node_dir/certs.d/docker.io/hosts.toml" <<EOF
server = "https://$mirror_addr"
ca = "$dir/pki/ca.crt"
EOF
	same_or_write "$node_dir/cni/10-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	same_or_write "$node_dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$node_dir/containerd.sock
# cgroup v1, and no systemd as PID 1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_root
failSwapOn: false
address: $node_ip
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
tlsCertFile: $dir/pki/kubelet-serving.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
# No cluster DNS: the pods here need none.
resolvConf: ""
volumePluginDir: $node_dir/volume-plugins
# A shared machine's disk may be fuller than a node's would be: evict only
# when it is nearly full, and never collect the images imported by hand.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
	same_or_write "$node_dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $node_dir/kube-proxy.kubeconfig}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $pod_cidr
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
iptables: {localhostNodePorts: false}
nodePortAddresses: [primary]
# 0 leaves the machine's conntrack settings as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

node_cgroups_up() {
	local c
	for c in /sys/fs/cgroup/*/; do
		[ -f "$c/cgroup.procs" ] || continue # the empty cgroup2 beside them is not one of these
		mkdir -p "$c$cgroup_root"
	done
	cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$cgroup_root/cpuset.cpus"
	cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$cgroup_root/cpuset.mems"
}

# start_in_node NAME COMMAND...: start, in the node's namespaces.
start_in_node() {
	local name=$1
	shift
	start "$name" nsenter --target "$(node_holder)" --mount --net --pid -- env PATH="$node_bin:$PATH" "$@"
}

# node_load TARBALL...: import images into the node's containerd, as `kind load
# image-archive` does.
node_load() {
	local f
	for f in "$@"; do
		"$node_bin/ctr" --address "$node_dir/containerd.sock" --namespace k8s.io images import \
			--all-platforms --digests --snapshotter overlayfs "$f" >>"$dir/logs/images.log" 2>&1 ||
			{ say "importing $f failed, see $dir/logs/images.log"; exit 1; }
	done
}

node_up() {
	node_certificates
	node_config
	registry_up
	node_cgroups_up
	up_one containerd || start_in_node containerd "$node_bin/containerd" --config "$node_dir/containerd.toml"
	wait_for containerd 30 "$node_bin/ctr" --address "$node_dir/containerd.sock" version
	# The pods' sandbox image, which the kubelet never pulls.
	go -C "$root/hack/image" run . dir -o "$node_dir/pause.tar" -tag localhost/pause:go -user 65535:65535 \
		-entrypoint '["/pause"]' "$node_dir/pause-root" >>"$dir/logs/images.log"
	node_load "$node_dir/pause.tar"
	up_one kubelet || start_in_node kubelet "$bin/kubelet" --config "$node_dir/kubelet.yaml" --kubeconfig "$node_dir/kubelet.kubeconfig" \
		--hostname-override "$node_name" --node-ip "$node_ip" --node-labels type=real
	up_one kube-proxy || start_in_node kube-proxy "$bin/kube-proxy" --config "$node_dir/kube-proxy.yaml"
	wait_for kubelet 60 "$bin/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready "node/$node_name" --timeout=1s
	wait_for kube-proxy 30 in_node curl -sf http://127.0.0.1:10256/healthz
}

# node_down: stop every process of the node and remove what it left on this
# machine: its cgroups. Its namespaces, link, mounts and netfilter rules go
# with its last process.
node_down() {
	local unshare c
	if unshare=$(cat "$dir/pids/node" 2>/dev/null) && kill -0 "$unshare" 2>/dev/null; then
		kill -KILL "$unshare" # --kill-child: its child, the node's PID 1, dies, and with it the namespace
		while kill -0 "$unshare" 2>/dev/null; do sleep 0.05; done
	fi
	# A cgroup goes once its last process has; that may take the kernel a moment.
	for _ in $(seq 50); do
		for c in /sys/fs/cgroup/*/"$cgroup_root"; do
			if [ -d "$c" ]; then find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
		done
		compgen -G "/sys/fs/cgroup/*/$cgroup_root" >/dev/null || return 0
		sleep 0.1
	done
	say "could not remove the cgroups $(echo /sys/fs/cgroup/*/"$cgroup_root")"
	return 1
}
