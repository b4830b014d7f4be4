# Sourced by hack/deploy.sh and hack/undeploy.sh, with $kubectl and $hack
# set: the operator's objects in one namespace, as hack/installer.sh lays
# them out there (PART=operator OPERATOR_NAMESPACE=ns).

# stop_operator NS: delete the operator's Deployment in NS and wait until its
# Pods are gone: the leader releases its Lease on the way out, so another
# operator may lead at once, and never beside it.
stop_operator() {
	"$kubectl" delete --ignore-not-found --cascade=foreground --wait -n "$1" deployment/operador-promociones
}

# remove_namespaced NS: delete the operator's other objects in NS (its
# ServiceAccount, its leader election Role and RoleBinding, its metrics
# Service, its PodDisruptionBudget) and its Lease. Its cluster-wide objects
# are left: they have the same names wherever it runs.
remove_namespaced() {
	local ns=$1 objects
	objects=$(PART=operator OPERATOR_NAMESPACE=$ns "$hack/installer.sh" none - "$kubectl" |
		"$kubectl" get -f - --ignore-not-found -o \
			jsonpath='{range .items[?(@.metadata.namespace)]}{.kind}/{.metadata.name}{"\n"}{end}')
	# shellcheck disable=SC2086 # one kind/name a word
	"$kubectl" delete --ignore-not-found -n "$ns" $objects lease/operador-promociones
}
