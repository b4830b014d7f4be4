#!/usr/bin/env bash
# hack/installer.sh IMG OUT [KUBECTL]: manifiestos/ as one file, OUT, with the
# operator's image set to IMG through kustomize's images: field, in a
# kustomization made for the purpose; nothing in manifiestos/ is edited.
set -euo pipefail
img=$1 out=$2 kubectl=${3:-kubectl}
root=$(cd "$(dirname "$0")/.." && pwd)

# name:tag, name@sha256:..., or a bare name; a registry's port is not a tag.
case $img in
*@*) name=${img%@*} pin="digest: ${img#*@}" ;;
*)
	last=${img##*/}
	if [[ $last == *:* ]]; then name=${img%:*} pin="newTag: ${last##*:}"; else name=$img pin=""; fi
	;;
esac

mkdir -p "$(dirname "$out")"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$dir" "$root/manifiestos")
images:
- name: registry.iximiuz.com/tienda/operador-promociones
  newName: $name
  ${pin}
YAML
{
	echo "# operador-promociones: CRD, ServiceAccount, RBAC, roles, metrics and Deployment, with the image $img."
	echo "# Written by make build-installer from manifiestos/; apply with: kubectl apply -f $(basename "$out")"
	"$kubectl" kustomize "$dir"
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out: the operator's image is $img"
