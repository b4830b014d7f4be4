#!/usr/bin/env bash
# A real Kubernetes cluster on this machine, without Docker and without
# download sites: etcd, kube-apiserver, kube-controller-manager, kube-scheduler;
# two real nodes, node-01 and node-02 as in the lesson (containerd, runc, the
# kubelet and kube-proxy, each in namespaces of its own: hack/node.sh), where
# Pods run real processes, pulled from a registry that asks for credentials;
# and kwok playing the kubelet on two fake nodes, kwok-01 and kwok-02, where
# Pods are Running and Ready on paper, by the thousand.
#
# Pods go to the real nodes, unless their namespace is annotated
# scheduler.alpha.kubernetes.io/node-selector=type=kwok (the PodNodeSelector
# admission plugin): the tests that need hundreds of Pods put them on kwok.
#
#   hack/cluster.sh up      start it in the background (idempotent)
#   hack/cluster.sh down    stop exactly the processes it started, remove its state
#   hack/cluster.sh status  say whether it runs
#   hack/cluster.sh load TARBALL...  import images into the real nodes' containerd
#   hack/cluster.sh push TARBALL REF push an image tarball (make image's) to the
#                           cluster's registry, REF being registry.iximiuz.com/...
#   hack/cluster.sh node [NODE] CMD...  run CMD on node-01 (or NODE), as after ssh
#                           to a node: curl a ClusterIP, ctr containers ls, iptables-save
#   hack/cluster.sh kill-node NODE   kill a real node at once, as a machine lost
#                           (hack/cluster.sh up starts it again, empty)
#   hack/cluster.sh stop etcd|kube-apiserver, start etcd|kube-apiserver
#                           kill one component and start it again (outages, for the chaos suite)
#   hack/cluster.sh save    stop the control plane, keep a copy of etcd's data, start it again
#   hack/cluster.sh restore kill the control plane, put that copy back, start it again: the
#                           cluster as it was when saved, in seconds (the benchmarks, between
#                           runs, instead of deleting thousands of objects one by one)
#
# CLUSTER_DIR (default .cluster) holds the state: kubeconfig, logs/, pids/, etcd
# data, certificates and the node's files. CLUSTER_PORT (default 16443) is the
# API server's port; etcd takes the next two. Two clusters with different
# CLUSTER_DIR and CLUSTER_PORT can run side by side. CLUSTER_NODE=none leaves
# out the real nodes, and CLUSTER_NODE=real insists on them; by default they
# run where they can (Linux, root, cgroup v1 or v2) and, where not, every Pod is
# kwok's (hack/cluster.sh node-support says why).
# etcd runs with --unsafe-no-fsync (a test cluster: speed over durability);
# ETCD_FSYNC=on when etcd starts syncs every write to disk, as in production.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-$root/.cluster}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
api_port=${CLUSTER_PORT:-16443}
etcd_port=$((api_port + 1))
peer_port=$((api_port + 2))
kubeconfig=$dir/kubeconfig
real_node=${CLUSTER_NODE:-auto}
case $real_node in real | none | auto) ;; *) echo "CLUSTER_NODE is real, none or auto, not $real_node" >&2; exit 2 ;; esac
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

say() { echo "cluster: $*" >&2; }

source "$root/hack/node.sh"
# auto: the real nodes where they can run, kwok's nodes alone where not.
no_nodes_because=$(node_support)
if [ "$real_node" = auto ]; then
	if [ -z "$no_nodes_because" ]; then real_node=real; else real_node=none; fi
fi
if [ "$real_node" = real ]; then
	components+=(forward registry mirror)
	for n in "${real_nodes[@]}"; do components+=("containerd@$n" "kubelet@$n" "kube-proxy@$n"); done
fi

# pid_of NAME: the recorded pid, if that process is still the binary we started.
# NAME@NODE is NAME on that node; the network's process is a pause.
pid_of() {
	local f=$dir/pids/$1 pid binary=${1%@*}
	[ "$binary" = network ] && binary=pause
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "/$binary " && echo "$pid"
}

running() { # every component alive and the API server ready
	local c
	for c in "${components[@]}"; do pid_of "$c" >/dev/null || return 1; done
	"$bin/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1
}

# stop_first N: stop the first N components, the last started first, each
# asked to stop and then killed, and wait until each is gone.
stop_first() {
	local c pid i
	for ((i = $1 - 1; i >= 0; i--)); do
		c=${components[i]}
		pid=$(pid_of "$c") || continue
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
		rm -f "$dir/pids/$c"
	done
}

stop_all() {
	stop_first ${#components[@]}
	# The nodes last: until the API server is gone, it may still call them,
	# whose addresses must exist until then (a packet to them must not leave the machine).
	nodes_down
	rm -rf "$dir/pids"
}

# stop_control_plane: stop etcd, the API server, the controller-manager, the
# scheduler and kwok (the first five components); the real nodes go on running,
# and reconnects when they return.
stop_control_plane() { stop_first 5; }

# kill_control_plane: the same, all at once and with no time to finish, for a
# restore, which throws their state away: a graceful stop of each, one after
# the other, took ten seconds of every benchmark run. stop_first then finds
# them gone, or waits the moment they take to go.
kill_control_plane() {
	local c pid pids=()
	for c in "${components[@]:0:5}"; do
		if pid=$(pid_of "$c"); then
			kill -KILL "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
	done
	# A killed process loses its memory, and with it pid_of's sight of it,
	# before it closes its sockets: wait for each to be gone or a zombie (whose
	# sockets are closed), or a restarted API server finds its port taken.
	for pid in "${pids[@]}"; do
		for _ in $(seq 600); do
			[ -r "/proc/$pid/stat" ] && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ] || break
			sleep 0.05
		done
	done
	stop_first 5
}

# fail NAME MESSAGE: name the component and its log, leave nothing running.
fail() {
	say "$1 failed: $2"
	say "its log, $dir/logs/$1.log, ends with:"
	tail -n 8 "$dir/logs/$1.log" 2>/dev/null | sed 's/^/    /' >&2 || true
	stop_all
	exit 1
}

start() { # NAME COMMAND...: run COMMAND in the background, logging to logs/NAME.log, its pid in pids/NAME
	local name=$1
	shift
	# A session of its own: Ctrl+C on `make dev`, or a closed terminal, must not
	# reach the cluster. (No job control here, so setsid execs in place: $! is the binary.)
	setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/pids/$name"
}

wait_for() { # NAME SECONDS COMMAND...: wait until COMMAND succeeds while NAME lives
	local name=$1 secs=$2
	shift 2
	for _ in $(seq $((secs * 10))); do
		"$@" >/dev/null 2>&1 && return 0
		pid_of "$name" >/dev/null || fail "$name" "the process exited"
		sleep 0.1
	done
	fail "$name" "not ready after ${secs}s"
}

port_free() { # NAME PORT: fail, naming who listens, unless PORT is free within port_wait seconds
	local i
	for ((i = 0; i <= ${port_wait:-0} * 10; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null || return 0
		sleep 0.1
	done
	say "$1 cannot start: port $2 is already in use (set CLUSTER_PORT to move the cluster)"
	ss -Hltnp "sport = :$2" 2>/dev/null | sed 's/^/    listening: /' >&2 || true
	exit 1
}

certificates() {
	local p=$dir/pki
	# Written last: a run interrupted while making them starts over.
	[ -f "$p/complete" ] && return 0
	rm -rf "$p"
	mkdir -p "$p"
	(
		cd "$p"
		umask 077
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=operador-promociones-ca" \
			-keyout ca.key -out ca.crt
		openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out apiserver.crt \
			-extfile <(echo "subjectAltName=IP:127.0.0.1,IP:$host_ip,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc")
		# The admin is in system:masters, which RBAC lets do anything; so is the
		# API server when it calls the kubelet (logs, exec, port-forward).
		openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=admin" -keyout admin.key -out admin.csr
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out admin.crt
		openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
			-keyout apiserver-kubelet-client.key -out apiserver-kubelet-client.csr
		openssl x509 -req -in apiserver-kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-out apiserver-kubelet-client.crt
		openssl genrsa -out sa.key 2048
		openssl rsa -in sa.key -pubout -out sa.pub
		touch complete
	) >"$dir/logs/pki.log" 2>&1 || { say "making certificates failed, see $dir/logs/pki.log"; exit 1; }
}

write_kubeconfig() { # PATH CERTIFICATE (without .crt/.key) [ADDRESS]: a kubeconfig for that identity
	(
		umask 077
		cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://${3:-127.0.0.1}:$api_port
    certificate-authority-data: $(base64 -w0 "$dir/pki/ca.crt")
users:
- name: user
  user:
    client-certificate-data: $(base64 -w0 "$2.crt")
    client-key-data: $(base64 -w0 "$2.key")
contexts:
- name: local
  context: {cluster: local, user: user, namespace: default}
current-context: local
EOF
	)
}

nodes() {
	local n
	for n in kwok-01 kwok-02; do
		cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations: {node.alpha.kubernetes.io/ttl: "0", kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: $n, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
spec: {providerID: "kwok://$n"}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "2000"}
  capacity: {cpu: "32", memory: 256Gi, pods: "2000"}
EOF
	done
}

start_etcd() {
	start etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-cluster "default=http://127.0.0.1:$peer_port" $([ "${ETCD_FSYNC:-off}" = on ] || echo --unsafe-no-fsync)
	wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_port/health"
}

start_kube_apiserver() {
	local p=$dir/pki kc=(--kubeconfig "$kubeconfig") node_flags=()
	# Every write, who made it and its answer, one JSON line each: the chaos
	# suite proves with it that a deposed leader wrote nothing.
	cat >"$dir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
EOF
	if [ "$real_node" = real ]; then
		# Pods go to the real nodes unless their namespace says type=kwok.
		cat >"$dir/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodNodeSelector
  configuration:
    podNodeSelectorPluginConfig:
      clusterDefaultNodeSelector: type=real
EOF
		# The kubernetes Service leads to the node's way in (forward), for Pods
		# that call the API server (the operator's); the API server calls the
		# kubelet for logs and port-forward.
		node_flags=(--advertise-address "$host_ip" --admission-control-config-file "$dir/admission.yaml"
			--enable-admission-plugins OwnerReferencesPermissionEnforcement,PodSecurity,PodNodeSelector
			--kubelet-client-certificate "$p/apiserver-kubelet-client.crt" --kubelet-client-key "$p/apiserver-kubelet-client.key"
			--kubelet-certificate-authority "$p/ca.crt" --kubelet-preferred-address-types InternalIP
			# Test-sized: the Pods of a node lost are replaced elsewhere 30 s after it
			# is found NotReady, not 300 s (the tolerations every Pod gets by default):
			# longer than the operator's Lease (30 s), so that a leader is back while
			# a shop is short of a pod, as on a cluster with the default timings.
			--default-not-ready-toleration-seconds 30 --default-unreachable-toleration-seconds 30)
	else
		# 127.0.0.1 cannot be an endpoint of the kubernetes Service; no Pod calls it anyway.
		node_flags=(--advertise-address 127.0.0.1 --enable-admission-plugins OwnerReferencesPermissionEnforcement,PodSecurity
			--endpoint-reconciler-type none)
	fi
	start kube-apiserver "$bin/kube-apiserver" --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log" \
		--audit-log-maxsize 2000 --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --secure-port "$api_port" \
		--tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" --client-ca-file "$p/ca.crt" \
		--authorization-mode Node,RBAC "${node_flags[@]}" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
		--service-cluster-ip-range 10.96.0.0/16 --allow-privileged=false
	wait_for kube-apiserver 90 "$bin/kubectl" "${kc[@]}" get --raw /readyz
}

# stop_one NAME: stop one component, as an outage would (the chaos suite).
stop_one() {
	local pid
	pid=$(pid_of "$1") || { say "$1 is not running"; exit 1; }
	kill -KILL "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	rm -f "$dir/pids/$1"
	say "$1 stopped"
}

# start_one NAME: start again a component stopped by stop_one.
start_one() {
	say "starting $1"
	case $1 in
	etcd) start_etcd ;;
	kube-apiserver) start_kube_apiserver ;;
	*) say "only etcd and kube-apiserver can be restarted alone"; exit 2 ;;
	esac
}

# kwok_stages prints kwok's fast stages, but for one thing: a Pod annotated
# pod-ready.stage.kwok.x-k8s.io/delay (a duration, "2s") becomes Ready that
# long after it runs, as a slow readiness probe would have it; the chaos
# suite's rollout scenario annotates its pods so. Without the annotation,
# at once, as before.
kwok_stages() {
	local work rc
	work=$(mktemp -d)
	cp -r "$kwok_dir/kustomize/stage" "$work/stage" && chmod -R u+w "$work" || return 1
	mkdir "$work/local"
	cat >"$work/local/kustomization.yaml" <<'STAGES'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../stage/fast
patches:
- target: {kind: Stage, name: pod-ready}
  patch: |
    - op: add
      path: /spec/delay
      value:
        durationMilliseconds: 0
        durationFrom:
          expressionFrom: '.metadata.annotations["pod-ready.stage.kwok.x-k8s.io/delay"]'
STAGES
	"$bin/kubectl" kustomize "$work/local"
	rc=$?
	rm -rf "$work"
	return $rc
}

up() {
	if running; then
		say "already running; export KUBECONFIG=$kubeconfig"
		return 0
	fi
	# Start what does not run, and leave what runs: a component that died is
	# started again on the same data, and its log goes on (the evidence).
	mkdir -p "$dir/logs" "$dir/pids"
	if [ "${CLUSTER_NODE:-auto}" = auto ] && [ -n "$no_nodes_because" ]; then
		say "no real node can run here ($no_nodes_because): kwok's nodes only, and the operator runs on this machine, as in the lesson's Step 1 (go run .)"
	fi
	if [ -d "$dir/etcd" ]; then say "starting again what does not run; logs in $dir/logs/"; fi
	if ! pid_of etcd >/dev/null; then
		port_free etcd "$etcd_port"
		port_free etcd "$peer_port"
	fi
	pid_of kube-apiserver >/dev/null || port_free kube-apiserver "$api_port"
	if [ "$real_node" = real ]; then
		node_check
		net_up
		for n in "${real_nodes[@]}"; do
			use_node "$n"
			node_holder >/dev/null || node_net_up
		done
	fi
	certificates
	write_kubeconfig "$kubeconfig" "$dir/pki/admin"
	local p=$dir/pki kc=(--kubeconfig "$kubeconfig")
	up_one etcd || start_etcd
	up_one kube-apiserver || start_kube_apiserver
	if [ "$real_node" = real ]; then
		up_one forward || start forward "$dir/forward" "$host_ip:$api_port" "127.0.0.1:$api_port"
	fi
	local kcm_node_flags=()
	# Test-sized, with real nodes: a node whose kubelet went silent is NotReady after 20 s, not 50 s.
	if [ "$real_node" = real ]; then kcm_node_flags=(--node-monitor-grace-period 20s); fi
	up_one kube-controller-manager || start kube-controller-manager "$bin/kube-controller-manager" "${kc[@]}" \
		--authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
		--service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
		--leader-elect=false --secure-port 0 --kube-api-qps 500 --kube-api-burst 1000 \
		--concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10 --concurrent-gc-syncs 50 "${kcm_node_flags[@]}"
	up_one kube-scheduler || start kube-scheduler "$bin/kube-scheduler" "${kc[@]}" \
		--authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" --leader-elect=false --secure-port 0
	kwok_stages >"$dir/kwok-stages.yaml" || fail kwok "writing its stages"
	# kwok plays the kubelet only on the nodes annotated as its own, never on the real ones.
	if ! up_one kwok; then
		# kwok holds its nodes' Leases under a name new at each start, and
		# takes a Lease held under another (or not yet in its cache) only at
		# its next try, 10 s on, or when that holder's 40 s term ends; until
		# then it plays no Pod of that node. Started again (after a restore,
		# or after it died) it would find its last start's: they go first,
		# and it makes them new at once.
		"$bin/kubectl" "${kc[@]}" delete lease -n kube-node-lease kwok-01 kwok-02 --ignore-not-found >/dev/null ||
			fail kube-apiserver "deleting the Leases of kwok's nodes"
		start kwok "$bin/kwok" "${kc[@]}" --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
			--config "$dir/kwok-stages.yaml" --cidr 10.0.0.0/16 --node-ip 10.0.0.1 --node-lease-duration-seconds 40
	fi
	nodes | "$bin/kubectl" "${kc[@]}" apply -f - >>"$dir/logs/nodes.log" 2>&1 || fail kube-apiserver "creating the nodes (see $dir/logs/nodes.log)"
	wait_for kwok 60 "$bin/kubectl" "${kc[@]}" wait --for=condition=Ready node/kwok-01 node/kwok-02 --timeout=1s
	# The default ServiceAccount appears once the controller-manager runs; Pods need it.
	wait_for kube-controller-manager 60 "$bin/kubectl" "${kc[@]}" get serviceaccount default -n default
	pid_of kube-scheduler >/dev/null || fail kube-scheduler "the process exited"
	if [ "$real_node" = real ]; then nodes_up; fi

	say "running; logs in $dir/logs/"
	echo "export KUBECONFIG=$kubeconfig"
}

# up_one NAME: true if NAME runs; if not, say that it will be started.
up_one() {
	pid_of "$1" >/dev/null && return 0
	say "starting $1"
	return 1
}

down() {
	stop_all
	rm -rf "$dir"
	say "stopped"
}

case ${1:-} in
up)
	bin=$("$root/hack/k8s-binaries.sh")
	if [ "$real_node" = real ]; then node_bin=$("$root/hack/node-binaries.sh"); fi
	kwok_dir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	up
	;;
down) down ;;
load)
	shift
	node_bin=$("$root/hack/node-binaries.sh")
	for n in "${real_nodes[@]}"; do
		use_node "$n"
		{ [ "$real_node" = real ] && node_holder >/dev/null; } || { say "$n does not run: hack/cluster.sh up"; exit 1; }
		node_load "$@"
	done
	say "loaded into ${real_nodes[*]}: $*"
	;;
real-nodes) # exit 0 if the cluster runs with its real nodes
	[ "$real_node" = real ] && net_holder >/dev/null
	;;
node-support) # why no real node can run on this machine, or nothing
	echo "$no_nodes_because"
	;;
kill-node)
	use_node "${2:?usage: $0 kill-node NODE}"
	kill_node
	say "$2 killed: hack/cluster.sh up starts it again"
	;;
push)
	[ $# = 3 ] || { echo "usage: $0 push TARBALL $registry_host/REPOSITORY:TAG" >&2; exit 2; }
	{ [ "$real_node" = real ] && pid_of registry >/dev/null; } || { say "no registry runs: hack/cluster.sh up"; exit 1; }
	case $3 in
	"$registry_host"/*) ;;
	*) say "$3 is not in this cluster's registry: an image name starting $registry_host/"; exit 1 ;;
	esac
	# On this machine the name does not resolve (only in the node): crane goes
	# to the registry's address, with the same repository and tag.
	push_image "$2" "${registry_addr%:443}/${3#*/}"
	say "pushed $3"
	;;
node)
	shift
	use_node "${real_nodes[0]}"
	if [[ " ${real_nodes[*]} " == *" ${1:-} "* ]]; then use_node "$1" && shift; fi
	{ [ "$real_node" = real ] && node_holder >/dev/null; } || { say "$node_name does not run: hack/cluster.sh up"; exit 1; }
	node_bin=$("$root/hack/node-binaries.sh")
	CONTAINERD_ADDRESS=$node_dir/containerd.sock CONTAINERD_NAMESPACE=k8s.io PATH=$node_bin:$PATH in_node "$@"
	;;
stop) stop_one "${2:?usage: $0 stop etcd|kube-apiserver}" ;;
start)
	bin=$("$root/hack/k8s-binaries.sh")
	start_one "${2:?usage: $0 start etcd|kube-apiserver}"
	;;
save | restore)
	bin=$("$root/hack/k8s-binaries.sh")
	kwok_dir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	running || { say "not running: hack/cluster.sh up"; exit 1; }
	[ "$1" = save ] || [ -d "$dir/etcd-saved" ] || { say "nothing saved: hack/cluster.sh save"; exit 1; }
	if [ "$1" = save ]; then
		stop_control_plane # etcd stopped cleanly: its copy is whole
		rm -rf "$dir/etcd-saved" && cp -a "$dir/etcd" "$dir/etcd-saved"
	else
		kill_control_plane
		rm -rf "$dir/etcd" && cp -a "$dir/etcd-saved" "$dir/etcd"
		# A killed process may hold its port a moment longer: CI once found
		# the API server's taken right after a kill.
		port_wait=15
	fi
	up
	;;
status)
	bin=$("$root/hack/k8s-binaries.sh")
	if running; then say "running; export KUBECONFIG=$kubeconfig"; else say "not running"; exit 1; fi
	;;
*)
	echo "usage: $0 up|down|status|save|restore|load TARBALL...|push TARBALL REF|node [NODE] CMD...|kill-node NODE|stop NAME|start NAME" >&2
	exit 2
	;;
esac
