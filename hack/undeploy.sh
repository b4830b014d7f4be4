#!/usr/bin/env bash
# hack/undeploy.sh [KUBECTL] (make undeploy): delete the operator, and nothing
# of the API: the CRD, its guard, the users' roles, the Promociones and their
# shops stay, and the shops keep serving. It removes the operator wherever
# make deploy, kubectl apply -k or the lesson's kubectl apply -f put it: its
# own namespace, operador-promociones-system, and default.
set -euo pipefail
kubectl=${1:-kubectl}
hack=$(cd "$(dirname "$0")" && pwd)
source "$hack/layout.sh"
namespace=operador-promociones-system

# Its Pods first, and gone, so that the leader may still release its Lease
# on the way out.
stop_operator "$namespace"
stop_operator default
remove_namespaced "$namespace"
remove_namespaced default
# Its cluster-wide objects.
PART=operator "$hack/installer.sh" none - "$kubectl" | "$kubectl" delete --ignore-not-found -f -
# An install confined to namespaces (make deploy NAMESPACES=...) bound the
# operator's ClusterRole in each; wherever they are, they go too.
"$kubectl" get rolebindings --all-namespaces --field-selector metadata.name=operador-promociones -o \
	jsonpath='{range .items[?(@.roleRef.name=="operador-promociones")]}{.metadata.namespace}{"\n"}{end}' |
	while read -r ns; do "$kubectl" delete rolebinding operador-promociones -n "$ns"; done

# Its namespace, if it holds nothing that someone else put there (a pull
# secret, a certificate): what every namespace has, and Events, do not count.
if [ -n "$("$kubectl" get namespace "$namespace" --ignore-not-found -o name)" ]; then
	types=$("$kubectl" api-resources --verbs=list --namespaced -o name | grep -v -e '^events' -e '^endpoints' -e '^endpointslices' | paste -sd, -)
	left=$("$kubectl" get "$types" -n "$namespace" --ignore-not-found -o name 2>/dev/null |
		grep -v -x -e 'serviceaccount/default' -e 'configmap/kube-root-ca.crt' || true)
	if [ -z "$left" ]; then
		"$kubectl" delete namespace "$namespace"
	else
		echo "The namespace $namespace stays: it holds what make undeploy did not make:"
		echo "$left" | sed 's/^/  /'
	fi
fi
