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
# - cgroups under /operador-<port>/<node> in each cgroup v1 hierarchy,
#   removed on down.
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

# in_node CMD...: run CMD in the node's mount, network and PID namespaces.
in_node() {
	nsenter --target "$(node_holder)" --mount --net --pid -- "$@"
}

in_net() { nsenter --target "$(net_holder)" --net -- "$@"; }

# node_support: why no real node can run on this machine, or nothing if they
# can. CGROUP_FS stands for /sys/fs/cgroup in the tests.
node_support() {
	local fs=${CGROUP_FS:-/sys/fs/cgroup}
	if [ "$(uname -s)" != Linux ]; then echo "not Linux"; return; fi
	if [ "$(id -u)" != 0 ]; then echo "not root"; return; fi
	if [ -f "$fs/cgroup.controllers" ]; then echo "cgroup v2 only: the real nodes run on cgroup v1 for now"; return; fi
	if [ ! -d "$fs/memory" ] || [ ! -d "$fs/cpu" ]; then echo "no cgroup v1 memory and cpu hierarchies under $fs"; fi
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
	for _ in $(seq 50); do net_holder >/dev/null && break; sleep 0.1; done
	net_holder >/dev/null || fail network "its namespace did not start"
	ip link add "$host_veth" type veth peer name uplink netns "$(net_holder)"
	ip addr add "$host_ip/29" dev "$host_veth"
	ip link set "$host_veth" up
	in_net sh -ec 'ip link set lo up; ip link add br0 type bridge; ip link set br0 up; ip link set uplink master br0 up'
}

# node_net_up: the node's namespaces and its link to the network.
node_net_up() {
	say "starting $node_name's namespaces ($node_ip)"
	# A node whose namespaces died comes back as a new machine would: empty.
	rm -rf "$node_dir/var-lib" "$node_dir/var-log"
	mkdir -p "$node_dir/var-lib" "$node_dir/var-log" "$node_dir/sysctl" "$node_dir/cni"
	setsid unshare --mount --net --pid --fork --mount-proc --kill-child=SIGKILL "$dir/pause-root/pause" \
		>"$dir/logs/$node_name.log" 2>&1 </dev/null &
	echo $! >"$dir/pids/node@$node_name"
	for _ in $(seq 50); do node_holder >/dev/null && break; sleep 0.1; done
	local holder routes="" i
	holder=$(node_holder) || fail "$node_name" "its namespaces did not start"
	ip link add "$node_name" netns "$(net_holder)" type veth peer name eth0 netns "$holder"
	in_net ip link set "$node_name" master br0 up
	for i in "${!real_nodes[@]}"; do # the other nodes' pods, through their node
		[ "$((i + 1))" = "$node_num" ] || routes+="ip route add 10.244.$((i + 1)).0/24 via $(node_ip_of $((i + 1)));"
	done
	in_node sh -ec "ip link set lo up; ip addr add $node_ip/29 dev eth0; ip link set eth0 up; ip route add default via $host_ip; $routes"
	# The node's own filesystem: see the top of this file.
	printf '127.0.0.1 localhost %s\n::1 localhost\n%s %s\n' "$node_name" "$host_ip" "$registry_host" >"$node_dir/hosts"
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
	same_or_write "$node_dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$node_dir/containerd.sock
# cgroup v1, and no systemd as PID 1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_root/$node_name
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

node_cgroups_up() {
	local c
	for c in /sys/fs/cgroup/*/; do
		[ -f "$c/cgroup.procs" ] || continue # the empty cgroup2 beside them is not one of these
		mkdir -p "$c$cgroup_root/$node_name"
	done
	local d
	for d in "$cgroup_root" "$cgroup_root/$node_name"; do
		cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$d/cpuset.cpus"
		cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$d/cpuset.mems"
	done
}

# start_in_node NAME COMMAND...: start NAME@node, in the node's namespaces.
start_in_node() {
	local name=$1
	shift
	start "$name@$node_name" nsenter --target "$(node_holder)" --mount --net --pid -- env PATH="$node_bin:$PATH" "$@"
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
	node_cgroups_up
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
	local f unshare c
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
