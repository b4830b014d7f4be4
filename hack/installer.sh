#!/usr/bin/env bash
# hack/installer.sh IMG OUT [KUBECTL]: manifiestos/ as one file, OUT ("-" for
# stdout), with the operator's image set to IMG through kustomize's images:
# field, in a kustomization made for the purpose; nothing in manifiestos/ is
# edited. The environment chooses what goes in:
#
#   PART=all       (the default) the API, the operator's namespace and the operator:
#                  make build-installer, make deploy
#   PART=api       the CRD, its guard and the users' roles, which hold the users' data
#                  and what they may do with it: make install, make uninstall
#   PART=operator  the rest but the namespace, which runs the operator: make undeploy
#                  (hack/undeploy.sh) deletes it and leaves the API, the Promociones and
#                  their shops as they are
#   OPERATOR_NAMESPACE=ns  where the operator runs (default operador-promociones-system,
#                  manifiestos/sistema/namespace.yaml); "default" names the objects of
#                  the lesson's layout, for hack/deploy.sh and hack/undeploy.sh to remove
#   NAMESPACES=a,b the operator watches only these namespaces (--namespace) and
#                  may write only there: its ClusterRole is bound by a RoleBinding
#                  in each, instead of cluster-wide. The namespaces must exist.
#   WEB_IMAGE=ref  the web pods' image (--web-image), instead of deploy.yaml's
set -euo pipefail
img=$1 out=$2 kubectl=${3:-kubectl}
root=$(cd "$(dirname "$0")/.." && pwd)

namespace=${OPERATOR_NAMESPACE:-operador-promociones-system}
api=(crd.yaml protect-crd.yaml roles.yaml)
operator=(sa.yaml rbac.yaml metrics.yaml deploy.yaml)
part=${PART:-all}
case $part in
all)
	files=("${api[@]}" "${operator[@]}")
	[ "$namespace" = default ] || files=(sistema/namespace.yaml "${files[@]}")
	;;
api) files=("${api[@]}") ;;
operator) files=("${operator[@]}") ;;
*) echo "PART=$part: want all, api or operator" >&2; exit 2 ;;
esac

# name:tag, name@sha256:..., or a bare name; a registry's port is not a tag.
case $img in
*@*) name=${img%@*} pin="digest: ${img#*@}" ;;
*)
	last=${img##*/}
	if [[ $last == *:* ]]; then name=${img%:*} pin="newTag: ${last##*:}"; else name=$img pin=""; fi
	;;
esac

if ! [[ $namespace =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || [ ${#namespace} -gt 63 ]; then
	echo "OPERATOR_NAMESPACE: $namespace is not a namespace's name" >&2
	exit 2
fi

# manifiestos/' files in base/, moved to the operator's namespace by
# kustomize's namespace transformer (as manifiestos/Kustomization does),
# which also moves the ServiceAccount its bindings name; the RoleBindings
# in the watched namespaces are added beside base/, out of its reach.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/base"
for f in "${files[@]}"; do
	mkdir -p "$dir/base/$(dirname "$f")"
	cp "$root/manifiestos/$f" "$dir/base/$f"
done
{
	echo "apiVersion: kustomize.config.k8s.io/v1beta1"
	echo "kind: Kustomization"
	echo "namespace: $namespace"
	echo "resources:"
	printf -- '- %s\n' "${files[@]}"
} >"$dir/base/kustomization.yaml"
has() { [[ " ${files[*]} " == *" $1 "* ]]; }
resources=(base)

# Flags added to the operator's (of a repeated flag, the last wins), and with
# NAMESPACES, a RoleBinding in each instead of the ClusterRoleBinding.
args=() patches=()
if [ -n "${WEB_IMAGE:-}" ]; then
	if ! [[ $WEB_IMAGE =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]]; then
		echo "WEB_IMAGE: $WEB_IMAGE is not an image reference" >&2
		exit 2
	fi
	args+=("--web-image=$WEB_IMAGE")
fi
if [ -n "${NAMESPACES:-}" ]; then
	IFS=, read -ra namespaces <<<"$NAMESPACES"
	for ns in "${namespaces[@]}"; do
		if ! [[ $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || [ ${#ns} -gt 63 ]; then
			echo "NAMESPACES: $ns is not a namespace's name" >&2
			exit 2
		fi
		args+=("--namespace=$ns")
		has rbac.yaml || continue
		# One RoleBinding per namespace, from the file the Helm chart's are made of too.
		{ echo "---"; sed -e "s/OPERATOR_NAMESPACE/$namespace/" -e "s/NAMESPACE/$ns/" "$root/hack/rolebinding.yaml"; } >>"$dir/rolebindings.yaml"
	done
	if has rbac.yaml; then
		resources+=(rolebindings.yaml)
		patches+=("- patch: |
    \$patch: delete
    apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata:
      name: operador-promociones")
	fi
fi
if [ ${#args[@]} -gt 0 ] && has deploy.yaml; then
	p="- target: {kind: Deployment, name: operador-promociones}
  patch: |"
	for a in "${args[@]}"; do
		p+=$'\n'"    - {op: add, path: /spec/template/spec/containers/0/args/-, value: \"$a\"}"
	done
	patches+=("$p")
fi

{
	echo "apiVersion: kustomize.config.k8s.io/v1beta1"
	echo "kind: Kustomization"
	echo "resources:"
	printf -- '- %s\n' "${resources[@]}"
	echo "images:"
	echo "- name: registry.iximiuz.com/tienda/operador-promociones"
	echo "  newName: $name"
	[ -z "$pin" ] || echo "  $pin"
	if [ ${#patches[@]} -gt 0 ]; then
		echo "patches:"
		printf '%s\n' "${patches[@]}"
	fi
} >"$dir/kustomization.yaml"

rendered=$(
	echo "# operador-promociones ($part, in $namespace${NAMESPACES:+, confined to $NAMESPACES}), with the image $img."
	echo "# Written by hack/installer.sh from manifiestos/; apply with: kubectl apply -f FILE"
	"$kubectl" kustomize "$dir"
)
if [ "$out" = - ]; then
	echo "$rendered"
	exit 0
fi
mkdir -p "$(dirname "$out")"
echo "$rendered" >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out: the operator's image is $img, in the namespace $namespace${NAMESPACES:+, confined to $NAMESPACES}"
