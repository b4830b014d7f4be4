# The real nodes of hack/cluster.sh, sourced by it: node-01 and node-02, the
# lesson's two, each running containerd, runc, the kubelet and kube-proxy in
# namespaces of its own, so that Pods run real processes.
#
# Everything a node touches is its own and goes when it goes:
# - a network namespace, on the cluster's network: a bridge in a network
#   namespace of its own (the "network" process holds it), joined to this
#   machine by one veth pair, on a /29 of 10.201.0.0/16 chosen from the API
#   server's port: this machine's end is .1, node-01 .2, node-02 .3. The
#   kubelet listens on the node's address; forward (hack/image/forward) on
#   this machine's end takes the nodes' connections to the API server, which
#   listens on loopback only. Each node's pods have a /24 of 10.244.0.0/16,
#   and each node routes the other's to it across the bridge, so this machine
#   forwards nothing (its ip_forward stays as it is). The pods' bridge, their
#   addresses and every netfilter rule (kube-proxy, the kubelet, the CNI
#   bridge) live inside a node's namespace, and vanish with it.
# - a mount namespace, where /var/lib and /var/log are folders of the cluster
#   and /run is a tmpfs: containerd, the kubelet and the pods' mounts use their
#   usual paths, and none of their mounts reaches this machine's.
# - a PID namespace, whose first process (pause) reaps orphans. Killing it
#   kills every process of the node, containerd's shims and the containers
#   too: `hack/cluster.sh kill-node node-02` is a machine lost.
# - cgroups: on cgroup v1, /operador-<port>/<node> in each hierarchy, for
#   the pods; on cgroup v2, a cgroup delegated to the node, and a cgroup
#   namespace rooted there (see "cgroup v2" below). Removed on down.
# - the registry, the meeting point of the lesson's Step 4: the CNCF
#   Distribution registry, listening on this machine's end of the network only
#   (so only this machine and the nodes reach it), with TLS under the lesson's
#   name, registry.iximiuz.com (a certificate from the cluster's CA), and basic
#   auth (htpasswd; the user and password in registry/credentials). The name
#   resolves to it in the nodes' mount namespaces alone (their own
#   /etc/hosts), and their containerd trusts the cluster's CA for it
#   (certs.d). The image is pulled by its own name, never through a mirror:
#   containerd does not send a Pod's imagePullSecrets to a mirror.
# - a second, anonymous registry that containerd is told serves docker.io: it
#   holds the stand-in for the default web image under that image's own name,
#   so that the operator's defaults work here, and no pull leaves the machine.
#
# The kubelet sets six machine-wide kernel tunables when they differ from what
# it wants (vm.overcommit_memory, kernel.panic, ...). Inside a node's mount
# namespace it reads them from files holding its own values, so it writes none
# of this machine's settings.

real_nodes=(node-01 node-02)
net_link=$((api_port % 8192)) # one /29 per port: two clusters side by side get two
net_base=10.201.$((net_link / 32)).$((net_link % 32 * 8))
host_ip=${net_base%.*}.$((${net_base##*.} + 1))
host_veth=opn$api_port
cgroup_root=operador-$api_port
cgroup_fs=${CGROUP_FS:-/sys/fs/cgroup} # CGROUP_FS stands for it in the tests
# The controllers a node's cgroup must have on cgroup v2, as kind's node
# checks (CGROUP_V2_CONTROLLERS stands for them in the tests, on this
# project's machines, whose cgroup2 has only hugetlb: the rest are cgroup v1's).
cgroup_v2_controllers=${CGROUP_V2_CONTROLLERS:-cpu memory pids}
pod_cidrs=10.244.0.0/16
registry_host=registry.iximiuz.com # the lesson's: deploy.yaml's image names it
registry_addr=$host_ip:443
mirror_addr=$host_ip:5443 # docker.io, for the nodes

# use_node NAME: make NAME the node that the functions below work on.
use_node() {
	local i
	for i in "${!real_nodes[@]}"; do
		[ "${real_nodes[i]}" = "$1" ] || continue
		node_name=$1
		node_num=$((i + 1))
		node_dir=$dir/$1
		node_ip=$(node_ip_of "$node_num")
		pod_cidr=10.244.$node_num.0/24
		return 0
	done
	say "no node $1: the nodes are ${real_nodes[*]}"
	exit 2
}

node_ip_of() { echo "${net_base%.*}.$((${net_base##*.} + 1 + $1))"; }

net_holder() { pid_of network; } # the network's process: its network namespace holds the bridge

node_holder() { # the node's PID 1, as this machine sees it
	local unshare
	unshare=$(cat "$dir/pids/node@$node_name" 2>/dev/null) || return 1
	cat "/proc/$unshare/task/$unshare/children" 2>/dev/null | awk '{print $1}' | grep .
}

# in_node CMD...: run CMD in the node's mount, network and PID namespaces,
# and its cgroup namespace on cgroup v2.
in_node() {
	local ns
	node_ns
	nsenter --target "$(node_holder)" "${ns[@]}" -- "$@"
}

in_net() { nsenter --target "$(net_holder)" --net -- "$@"; }

# in_own_net: the network's process runs, in a network namespace other than
# this machine's.
in_own_net() {
	local pid
	pid=$(net_holder) && [ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/self/ns/net)" ]
}

# cgroup_version: v2 where one unified hierarchy is mounted, v1 where the
# controllers have hierarchies of their own (the unified one, if any, empty
# beside them, as on this project's machines), nothing where neither is.
cgroup_version() {
	if [ -f "$cgroup_fs/cgroup.controllers" ]; then
		echo v2
	elif [ -d "$cgroup_fs/memory" ] && [ -d "$cgroup_fs/cpu" ]; then
		echo v1
	fi
}
cgroups=$(cgroup_version)

# node_support: why no real node can run on this machine, or nothing if they can.
node_support() {
	if [ "$(uname -s)" != Linux ]; then echo "not Linux"; return; fi
	if [ "$(id -u)" != 0 ]; then echo "not root"; return; fi
	case $cgroups in
	v1) ;;
	v2)
		local missing
		missing=$(cgroup_missing "$cgroup_fs/cgroup.controllers")
		if [ -n "$missing" ]; then echo "cgroup v2 without the $missing controller(s)"; return; fi
		# A cgroup other than the hierarchy's root (cgroup.type), with processes
		# in it (a container's, seen from inside): it hands no controller
		# down, and the processes are not ours to move.
		if ! cgroup_v2_systemd && [ -f "$cgroup_fs/cgroup.type" ] && [ -n "$(cgroup_missing "$cgroup_fs/cgroup.subtree_control")" ] &&
			[ -n "$(head -c1 "$cgroup_fs/cgroup.procs")" ]; then
			echo "cgroup v2, seen from a cgroup with processes of its own (a container?): no subtree can be delegated to the nodes"
		fi
		;;
	*) echo "no cgroup v1 memory and cpu hierarchies and no cgroup v2 under $cgroup_fs" ;;
	esac
}

# cgroup v2, the kubelet's native mode, as kind's node runs it: each node has
# a cgroup delegated to it, C, and a cgroup namespace rooted at C, with
# cgroup2 mounted afresh in its mount namespace, so that its kubelet sees C as
# the root and makes /kubepods in it (cgroupfs driver, cgroupRoot /). The
# node's own processes (its PID 1, containerd, the kubelet, kube-proxy) sit
# in the leaf C/init: a cgroup that hands controllers down to its children may
# hold no process itself. C is
# - where systemd runs this machine (it owns the tree), a transient scope with
#   Delegate=yes, made by systemd-run, which systemd removes when it empties;
# - elsewhere (WSL, OpenRC, a container), <cgroup_fs>/operador-<port>/<node>,
#   at the hierarchy's root as Docker's cgroupfs driver makes its own. The
#   controllers that the root did not hand down yet are enabled there, and
#   put back on down.
# This project's machines have cgroup v1: the v2 path is tested there only
# step by step, on their cgroup2 with its one controller (TestNodeCgroupV2).

cgroup_v2_systemd() { [ -z "${CGROUP_FS:-}" ] && [ -d /run/systemd/system ] && command -v systemd-run >/dev/null; }

cgroup_missing() { # FILE: the node's controllers that FILE (cgroup.controllers, or cgroup.subtree_control) does not list
	local c out=""
	for c in $cgroup_v2_controllers; do grep -qw "$c" "$1" 2>/dev/null || out+="$c "; done
	echo "${out% }"
}

cgroup_enable() { # DIR: DIR hands the node's controllers down to its children
	local c
	for c in $(cgroup_missing "$1/cgroup.subtree_control"); do
		echo "+$c" >"$1/cgroup.subtree_control" || { say "cannot enable the $c controller in $1"; return 1; }
		# At the root, what was enabled and which cgroups were there: see cgroups_down.
		if [ "$1" = "$cgroup_fs" ]; then
			echo "$c" >>"$dir/cgroup-root-enabled"
			[ -f "$dir/cgroup-root-children" ] || find "$cgroup_fs" -mindepth 1 -maxdepth 1 -type d >"$dir/cgroup-root-children"
		fi
	done
}

# enter_cgroup DIR: into the array enter, a prefix that runs a command in the cgroup DIR.
enter_cgroup() { enter=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$1"); }

# node_ns: into the array ns, the node's namespaces, as nsenter's flags.
node_ns() {
	ns=(--mount --net --pid)
	if [ "$cgroups" = v2 ]; then ns+=(--cgroup); fi
}

# node_cgroup: the cgroup delegated to the node (v2), recorded when it started.
node_cgroup() { cat "$node_dir/cgroup"; }

# cgroup_v2_enter: into the array enter, how to start the node's first process in C.
cgroup_v2_enter() {
	if cgroup_v2_systemd; then
		enter=(systemd-run --scope --quiet --collect "--unit=$cgroup_root-$node_name" --property=Delegate=yes --)
	else
		cgroup_enable "$cgroup_fs"
		mkdir -p "$cgroup_fs/$cgroup_root/$node_name"
		cgroup_enable "$cgroup_fs/$cgroup_root"
		enter_cgroup "$cgroup_fs/$cgroup_root/$node_name"
	fi
}

# cgroup_v2_delegate: once the node's first process runs in C, move the
# node's processes to C/init and let C hand its controllers down.
cgroup_v2_delegate() {
	local c pid
	c=$cgroup_fs$(sed -n 's/^0:://p' "/proc/$(cat "$dir/pids/node@$node_name")/cgroup")
	echo "$c" >"$node_dir/cgroup"
	mkdir -p "$c/init"
	for _ in $(seq 10); do
		[ -n "$(head -c1 "$c/cgroup.procs")" ] || break
		for pid in $(cat "$c/cgroup.procs"); do echo "$pid" >"$c/init/cgroup.procs" 2>/dev/null || true; done
	done
	cgroup_enable "$c"
}

node_check() {
	[ -z "$no_nodes_because" ] || { say "the real nodes cannot run here: $no_nodes_because (CLUSTER_NODE=none: kwok's nodes only)"; exit 1; }
	"$root/hack/debian-packages.sh" node
}

# net_up: the cluster's network, before the API server, which listens on
# this machine's end of it.
net_up() {
	net_holder >/dev/null && return 0
	if ip -o addr show | grep -q " $host_ip/"; then
		say "$host_ip is already on a link of this machine (a cluster on port $api_port left behind?): hack/cluster.sh down"
		exit 1
	fi
	say "starting the nodes' network ($net_base/29, this machine $host_ip)"
	mkdir -p "$dir/pause-root"
	# pause: the network's holder, each node's PID 1, and each pod's sandbox in the image of node_up.
	go build -C "$root/hack/image" -o "$dir/pause-root/pause" ./pause
	go build -C "$root/hack/image" -o "$dir/forward" ./forward
	start network unshare --net "$dir/pause-root/pause"
	# Its pid is known at once, before unshare has moved it to a network of
	# its own: a link put in "its" namespace before that lands in this
	# machine's (seen once, the machine loaded: Cannot find device "uplink").
	for _ in $(seq 50); do in_own_net && break; sleep 0.1; done
	in_own_net || fail network "its namespace did not start"
	ip link add "$host_veth" type veth peer name uplink netns "$(net_holder)"
	ip addr add "$host_ip/29" dev "$host_veth"
	ip link set "$host_veth" up
	in_net sh -ec 'ip link set lo up; ip link add br0 type bridge; ip link set br0 up; ip link set uplink master br0 up'
}

# node_net_up: the node's namespaces and its link to the network.
node_net_up() {
	say "starting $node_name's namespaces ($node_ip)"
	node_ns_up
	local routes="" i
	ip link add "$node_name" netns "$(net_holder)" type veth peer name eth0 netns "$(node_holder)"
	in_net ip link set "$node_name" master br0 up
	for i in "${!real_nodes[@]}"; do # the other nodes' pods, through their node
		[ "$((i + 1))" = "$node_num" ] || routes+="ip route add 10.244.$((i + 1)).0/24 via $(node_ip_of $((i + 1)));"
	done
	in_node sh -ec "ip link set lo up; ip addr add $node_ip/29 dev eth0; ip link set eth0 up; ip route add default via $host_ip; $routes"
}

# node_ns_up: the node's namespaces, its cgroup and its own filesystem (see the top).
node_ns_up() {
	# A node whose namespaces died comes back as a new machine would: empty.
	rm -rf "$node_dir/var-lib" "$node_dir/var-log"
	mkdir -p "$node_dir/var-lib" "$node_dir/var-log" "$node_dir/sysctl" "$node_dir/cni" "$dir/pids" "$dir/logs"
	local enter=() ns
	node_ns
	if [ "$cgroups" = v2 ]; then cgroup_v2_enter; fi
	setsid "${enter[@]}" unshare "${ns[@]}" --fork --mount-proc --kill-child=SIGKILL "$dir/pause-root/pause" \
		>"$dir/logs/$node_name.log" 2>&1 </dev/null &
	echo $! >"$dir/pids/node@$node_name"
	for _ in $(seq 50); do node_holder >/dev/null && break; sleep 0.1; done
	node_holder >/dev/null || fail "$node_name" "its namespaces did not start"
	if [ "$cgroups" = v2 ]; then cgroup_v2_delegate; fi
	printf '127.0.0.1 localhost %s\n::1 localhost\n%s %s\n' "$node_name" "$host_ip" "$registry_host" >"$node_dir/hosts"
	local sysctls="vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000"
	in_node sh -ec '
		d=$1 cgroups=$2
		shift 2
		mount -n -t tmpfs -o mode=755 tmpfs /run
		mount -n --bind "$d/var-lib" /var/lib
		mount -n --bind "$d/var-log" /var/log
		mount -n --bind "$d/hosts" /etc/hosts
		# Mounted from inside its cgroup namespace, cgroup2 shows the node its own cgroup as the root.
		if [ "$cgroups" = v2 ]; then mount -n -t cgroup2 cgroup2 /sys/fs/cgroup; fi
		for kv in "$@"; do
			f=$d/sysctl/$(echo "${kv%=*}" | tr / .)
			echo "${kv#*=}" >"$f"
			mount -n --bind "$f" "/proc/sys/${kv%=*}"
		done' sh "$node_dir" "$cgroups" $sysctls
}

node_certificates() { # client and serving certificates of the node's kubelet, and kube-proxy's
	local n=$node_name
	(
		cd "$dir/pki"
		umask 077
		if [ ! -f "kubelet-$n.crt" ]; then
			openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$n" -keyout "kubelet-$n.key" -out "kubelet-$n.csr"
			openssl x509 -req -in "kubelet-$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out "kubelet-$n.crt.new"
			mv "kubelet-$n.crt.new" "kubelet-$n.crt"
		fi
		if [ ! -f "kubelet-serving-$n.crt" ]; then
			openssl req -newkey rsa:2048 -nodes -subj "/CN=$n" -keyout "kubelet-serving-$n.key" -out "kubelet-serving-$n.csr"
			openssl x509 -req -in "kubelet-serving-$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
				-out "kubelet-serving-$n.crt.new" -extfile <(echo "subjectAltName=IP:$node_ip")
			mv "kubelet-serving-$n.crt.new" "kubelet-serving-$n.crt"
		fi
		if [ ! -f kube-proxy.crt ]; then
			openssl req -newkey rsa:2048 -nodes -subj "/CN=system:kube-proxy" -keyout kube-proxy.key -out kube-proxy.csr
			openssl x509 -req -in kube-proxy.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out kube-proxy.crt.new
			mv kube-proxy.crt.new kube-proxy.crt
		fi
	) >>"$dir/logs/pki.log" 2>&1 || { say "making $n's certificates failed, see $dir/logs/pki.log"; exit 1; }
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
		same_or_write "$dir/registry/$name.yml" <<EOF
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
	ln -sf "$node_bin/registry" "$dir/registry/mirror"
	up_one registry || start registry env OTEL_TRACES_EXPORTER=none "$node_bin/registry" serve "$dir/registry/registry.yml"
	up_one mirror || start mirror env OTEL_TRACES_EXPORTER=none "$dir/registry/mirror" serve "$dir/registry/mirror.yml"
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
	write_kubeconfig "$node_dir/kubelet.kubeconfig" "$p/kubelet-$node_name" "$host_ip"
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
	# The pods' cgroups: on cgroup v1 under the node's own, on v2 at the root
	# of its cgroup namespace. No systemd as the node's PID 1: cgroupfs.
	local pods_cgroup=/$cgroup_root/$node_name
	if [ "$cgroups" = v2 ]; then pods_cgroup=/; fi
	same_or_write "$node_dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$node_dir/containerd.sock
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $pods_cgroup
failSwapOn: false
address: $node_ip
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
tlsCertFile: $dir/pki/kubelet-serving-$node_name.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving-$node_name.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
# No cluster DNS: the pods here need none.
resolvConf: ""
volumePluginDir: $node_dir/volume-plugins
# A shared machine's disk may be fuller than a node's would be: evict only
# when it is nearly full, and never collect an image.
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
clusterCIDR: $pod_cidrs
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
iptables: {localhostNodePorts: false}
nodePortAddresses: [primary]
# 0 leaves the machine's conntrack settings as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# node_cgroups_v1_up: the pods' cgroups on cgroup v1, in each hierarchy.
node_cgroups_v1_up() {
	local c d
	for c in "$cgroup_fs"/*/; do
		[ -f "$c/cgroup.procs" ] || continue # the empty cgroup2 beside them is not one of these
		mkdir -p "$c$cgroup_root/$node_name"
	done
	for d in "$cgroup_root" "$cgroup_root/$node_name"; do
		cat "$cgroup_fs/cpuset/cpuset.cpus" >"$cgroup_fs/cpuset/$d/cpuset.cpus"
		cat "$cgroup_fs/cpuset/cpuset.mems" >"$cgroup_fs/cpuset/$d/cpuset.mems"
	done
}

# start_in_node NAME COMMAND...: start NAME@node, in the node's namespaces
# (and, on cgroup v2, in its cgroup's leaf, C/init).
start_in_node() {
	local name=$1 enter=() ns
	shift
	node_ns
	if [ "$cgroups" = v2 ]; then enter_cgroup "$(node_cgroup)/init"; fi
	start "$name@$node_name" "${enter[@]}" nsenter --target "$(node_holder)" "${ns[@]}" -- env PATH="$node_bin:$PATH" "$@"
}

# node_load TARBALL...: import images into the node's containerd, as `kind load
# image-archive` does.
node_load() {
	local f
	for f in "$@"; do
		"$node_bin/ctr" --address "$node_dir/containerd.sock" --namespace k8s.io images import \
			--all-platforms --digests --snapshotter overlayfs "$f" >>"$dir/logs/images.log" 2>&1 ||
			{ say "importing $f into $node_name failed, see $dir/logs/images.log"; exit 1; }
	done
}

node_running() { # every process of the node alive
	local c
	for c in containerd kubelet kube-proxy; do pid_of "$c@$node_name" >/dev/null || return 1; done
}

node_up() {
	node_certificates
	node_config
	if [ "$cgroups" = v1 ]; then node_cgroups_v1_up; fi
	up_one "containerd@$node_name" || start_in_node containerd "$node_bin/containerd" --config "$node_dir/containerd.toml"
	wait_for "containerd@$node_name" 30 "$node_bin/ctr" --address "$node_dir/containerd.sock" version
	# The pods' sandbox image, which the kubelet never pulls.
	[ -f "$dir/pause.tar" ] || go -C "$root/hack/image" run . dir -o "$dir/pause.tar" -tag localhost/pause:go -user 65535:65535 \
		-entrypoint '["/pause"]' "$dir/pause-root" >>"$dir/logs/images.log"
	node_load "$dir/pause.tar"
	up_one "kubelet@$node_name" || start_in_node kubelet "$bin/kubelet" --config "$node_dir/kubelet.yaml" --kubeconfig "$node_dir/kubelet.kubeconfig" \
		--hostname-override "$node_name" --node-ip "$node_ip" --node-labels type=real
	up_one "kube-proxy@$node_name" || start_in_node kube-proxy "$bin/kube-proxy" --config "$node_dir/kube-proxy.yaml"
}

# nodes_up: the registries, then every node that does not run, then wait for
# them all to be Ready.
nodes_up() {
	registry_up
	local n
	for n in "${real_nodes[@]}"; do
		use_node "$n"
		node_running || node_up
	done
	for n in "${real_nodes[@]}"; do
		use_node "$n"
		wait_for "kubelet@$n" 60 "$bin/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready "node/$n" --timeout=1s
		wait_for "kube-proxy@$n" 30 in_node curl -sf http://127.0.0.1:10256/healthz
	done
}

# kill_node: the node's PID 1 killed, as a machine lost: every process of the
# node, its containers and its network namespace go at once.
kill_node() {
	local holder
	holder=$(node_holder) || { say "$node_name does not run"; exit 1; }
	kill -KILL "$holder"
	while kill -0 "$holder" 2>/dev/null; do sleep 0.05; done
}

# nodes_down: stop every process of the nodes and of their network, and
# remove what they left on this machine: their cgroups. Their namespaces,
# links, mounts and netfilter rules go with their last process.
nodes_down() {
	local f unshare
	for f in "$dir"/pids/node@* "$dir/pids/network"; do
		[ -f "$f" ] || continue
		if unshare=$(cat "$f") && kill -0 "$unshare" 2>/dev/null; then
			kill -KILL "$unshare" # a node's unshare has --kill-child: its PID 1 dies, and with it the namespace
			while kill -0 "$unshare" 2>/dev/null; do sleep 0.05; done
		fi
	done
	# The kernel takes a namespace's links down a moment after its last
	# process: this machine's end goes now, and with it the pair.
	ip link del "$host_veth" 2>/dev/null || true
	cgroups_down
}

# cgroups_down: remove the nodes' cgroups, once their processes are gone, and
# put back what cgroup_enable changed at the root of cgroup v2.
cgroups_down() {
	local c f left trees=()
	if [ "$cgroups" = v1 ]; then
		trees=("$cgroup_fs"/*/"$cgroup_root")
	else
		trees=("$cgroup_fs/$cgroup_root")
		for f in "$dir"/*/cgroup; do [ -f "$f" ] && trees+=("$(cat "$f")"); done
	fi
	# A cgroup goes once its last process has; that may take the kernel a moment.
	for _ in $(seq 50); do
		left=()
		for c in "${trees[@]}"; do
			[ -d "$c" ] || continue
			if cgroup_v2_systemd && [ "$c" != "$cgroup_fs/$cgroup_root" ]; then
				# A scope: what is in it is ours, the scope systemd's, which removes it once empty.
				find "$c" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
			else
				find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
			fi
			if [ -d "$c" ]; then left+=("$c"); fi
		done
		[ ${#left[@]} = 0 ] && break
		sleep 0.1
	done
	if [ ${#left[@]} != 0 ]; then
		say "could not remove the cgroups ${left[*]}"
		return 1
	fi
	rm -f "$dir"/*/cgroup
	cgroup_root_put_back
}

# cgroup_root_put_back: disable at the root of cgroup v2 the controllers that
# cgroup_enable enabled there, unless a cgroup made since may use them
# (disabling one takes it from every cgroup below): then say so, and leave them.
cgroup_root_put_back() {
	[ -f "$dir/cgroup-root-enabled" ] || return 0
	local c
	if find "$cgroup_fs" -mindepth 1 -maxdepth 1 -type d | grep -vxFf "$dir/cgroup-root-children" | grep -q .; then
		say "left the $(tr '\n' ' ' <"$dir/cgroup-root-enabled")controller(s) enabled at $cgroup_fs: cgroups made since the nodes started may use them"
	else
		for c in $(cat "$dir/cgroup-root-enabled"); do
			echo "-$c" >"$cgroup_fs/cgroup.subtree_control" || say "could not disable the $c controller at $cgroup_fs again"
		done
	fi
	rm -f "$dir/cgroup-root-enabled" "$dir/cgroup-root-children"
}
