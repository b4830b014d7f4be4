#!/usr/bin/env bash
# A real Kubernetes control plane on this machine, without Docker and without
# download sites: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# and kwok playing the kubelet on fake nodes (node-01, node-02) so that Pods
# become Running and Ready. Nothing runs a container.
#
#   hack/cluster.sh up      start it in the background (idempotent)
#   hack/cluster.sh down    stop exactly the processes it started, remove its state
#   hack/cluster.sh status  say whether it runs
#   hack/cluster.sh stop etcd|kube-apiserver, start etcd|kube-apiserver
#                           kill one component and start it again (outages, for the chaos suite)
#
# CLUSTER_DIR (default .cluster) holds the state: kubeconfig, logs/, pids/, etcd
# data and certificates. CLUSTER_PORT (default 16443) is the API server's port;
# etcd takes the next two. Two clusters with different CLUSTER_DIR and
# CLUSTER_PORT can run side by side.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-$root/.cluster}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
api_port=${CLUSTER_PORT:-16443}
etcd_port=$((api_port + 1))
peer_port=$((api_port + 2))
kubeconfig=$dir/kubeconfig
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

say() { echo "cluster: $*" >&2; }

# pid_of NAME: the recorded pid, if that process is still the binary we started.
pid_of() {
	local f=$dir/pids/$1 pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "/$1 " && echo "$pid"
}

running() { # every component alive and the API server ready
	local c
	for c in "${components[@]}"; do pid_of "$c" >/dev/null || return 1; done
	"$bin/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1
}

stop_all() {
	local c pid i
	for ((i = ${#components[@]} - 1; i >= 0; i--)); do
		c=${components[i]}
		pid=$(pid_of "$c") || continue
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	rm -rf "$dir/pids"
}

# fail NAME MESSAGE: name the component and its log, leave nothing running.
fail() {
	say "$1 failed: $2"
	say "its log, $dir/logs/$1.log, ends with:"
	tail -n 8 "$dir/logs/$1.log" 2>/dev/null | sed 's/^/    /' >&2 || true
	stop_all
	exit 1
}

start() { # NAME ARGS...: run the binary in the background, recording its pid
	local name=$1
	shift
	# A session of its own: Ctrl+C on `make dev`, or a closed terminal, must not
	# reach the cluster. (No job control here, so setsid execs in place: $! is the binary.)
	setsid "$bin/$name" "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
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

port_free() { # NAME PORT
	if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
		say "$1 cannot start: port $2 is already in use (set CLUSTER_PORT to move the cluster)"
		exit 1
	fi
}

certificates() {
	local p=$dir/pki
	[ -f "$p/admin.crt" ] && return 0
	mkdir -p "$p"
	(
		cd "$p"
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=operador-promociones-ca" \
			-keyout ca.key -out ca.crt
		openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out apiserver.crt \
			-extfile <(echo "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc")
		# The admin is in system:masters, which RBAC lets do anything.
		openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=admin" -keyout admin.key -out admin.csr
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out admin.crt
		openssl genrsa -out sa.key 2048
		openssl rsa -in sa.key -pubout -out sa.pub
	) >"$dir/logs/pki.log" 2>&1 || { say "making certificates failed, see $dir/logs/pki.log"; exit 1; }
}

write_kubeconfig() {
	local p=$dir/pki
	cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$p/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(base64 -w0 "$p/admin.crt")
    client-key-data: $(base64 -w0 "$p/admin.key")
contexts:
- name: local
  context: {cluster: local, user: admin, namespace: default}
current-context: local
EOF
}

nodes() {
	local n
	for n in node-01 node-02; do
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
	say "starting etcd"
	start etcd --name default --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-cluster "default=http://127.0.0.1:$peer_port" --unsafe-no-fsync
	wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_port/health"
}

start_kube_apiserver() {
	local p=$dir/pki kc=(--kubeconfig "$kubeconfig")
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
	say "starting kube-apiserver"
	start kube-apiserver --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log" \
		--audit-log-maxsize 500 --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
		--tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" --client-ca-file "$p/ca.crt" \
		--authorization-mode Node,RBAC \
		--enable-admission-plugins OwnerReferencesPermissionEnforcement,PodSecurity \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
		--service-cluster-ip-range 10.96.0.0/16 --allow-privileged=false \
		--endpoint-reconciler-type none
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
	case $1 in
	etcd) start_etcd ;;
	kube-apiserver) start_kube_apiserver ;;
	*) say "only etcd and kube-apiserver can be restarted alone"; exit 2 ;;
	esac
}

up() {
	if running; then
		say "already running; export KUBECONFIG=$kubeconfig"
		return 0
	fi
	stop_all # whatever is left of a cluster that is not healthy
	rm -rf "$dir/etcd" "$dir/logs"
	mkdir -p "$dir/logs" "$dir/pids"
	port_free kube-apiserver "$api_port"
	port_free etcd "$etcd_port"
	port_free etcd "$peer_port"
	certificates
	write_kubeconfig
	local p=$dir/pki kc=(--kubeconfig "$kubeconfig")
	start_etcd
	start_kube_apiserver
	say "starting kube-controller-manager, kube-scheduler and kwok"
	start kube-controller-manager "${kc[@]}" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
		--service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
		--leader-elect=false --secure-port 0 --kube-api-qps 500 --kube-api-burst 1000 \
		--concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10 --concurrent-gc-syncs 50
	start kube-scheduler "${kc[@]}" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
		--leader-elect=false --secure-port 0
	"$bin/kubectl" kustomize "$kwok_dir/kustomize/stage/fast" >"$dir/kwok-stages.yaml"
	start kwok "${kc[@]}" --manage-all-nodes=true --config "$dir/kwok-stages.yaml" \
		--cidr 10.0.0.0/16 --node-ip 10.0.0.1 --node-lease-duration-seconds 40
	nodes | "$bin/kubectl" "${kc[@]}" apply -f - >"$dir/logs/nodes.log" 2>&1 || fail kube-apiserver "creating the nodes (see $dir/logs/nodes.log)"
	wait_for kwok 60 "$bin/kubectl" "${kc[@]}" wait --for=condition=Ready node/node-01 node/node-02 --timeout=1s
	# The default ServiceAccount appears once the controller-manager runs; Pods need it.
	wait_for kube-controller-manager 60 "$bin/kubectl" "${kc[@]}" get serviceaccount default -n default
	pid_of kube-scheduler >/dev/null || fail kube-scheduler "the process exited"

	say "running; logs in $dir/logs/"
	echo "export KUBECONFIG=$kubeconfig"
}

down() {
	stop_all
	rm -rf "$dir"
	say "stopped"
}

case ${1:-} in
up)
	bin=$("$root/hack/k8s-binaries.sh")
	kwok_dir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	up
	;;
down) down ;;
stop) stop_one "${2:?usage: $0 stop etcd|kube-apiserver}" ;;
start)
	bin=$("$root/hack/k8s-binaries.sh")
	start_one "${2:?usage: $0 start etcd|kube-apiserver}"
	;;
status)
	bin=$("$root/hack/k8s-binaries.sh")
	if running; then say "running; export KUBECONFIG=$kubeconfig"; else say "not running"; exit 1; fi
	;;
*)
	echo "usage: $0 up|down|status|stop NAME|start NAME" >&2
	exit 2
	;;
esac
