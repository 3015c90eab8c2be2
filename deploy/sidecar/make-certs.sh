#!/usr/bin/env bash
# The sidecar webhook's certificate wiring (docs/csi.md, "Node mode or sidecar mode"):
#
#   1. a CA (kept in DIR: a second run reuses it, so the caBundle stays valid),
#   2. a serving certificate for cloudfs-sidecar-webhook.cloudfs.svc (the name
#      the API server calls; also .svc.cluster.local), signed by the CA,
#   3. the Secret cloudfs-sidecar-webhook-tls (kubernetes.io/tls) in cloudfs,
#   4. the CA as caBundle of the MutatingWebhookConfiguration cloudfs-sidecar,
#   5. a rollout restart of the webhook (it reads its certificate at start).
#
#   kubectl apply -f deploy/sidecar/          # first: step 4 patches what it made
#   deploy/sidecar/make-certs.sh [--dir DIR] [--days N] [--no-kubectl]
#
# --dir DIR     where the CA and certificate are kept (default: a temporary
#               directory removed at the end; keep ca.key somewhere safe if you
#               want later runs to renew without a new caBundle)
# --days N      the serving certificate's lifetime (default 365; the CA: 3650)
# --no-kubectl  only make the files in DIR (steps 1 and 2)
#
# With cert-manager instead: a Certificate in namespace cloudfs with
# secretName cloudfs-sidecar-webhook-tls and dnsNames
# cloudfs-sidecar-webhook.cloudfs.svc and cloudfs-sidecar-webhook.cloudfs.svc.cluster.local
# from an Issuer of yours, and the annotation
# cert-manager.io/inject-ca-from: cloudfs/cloudfs-sidecar-webhook-tls
# on the MutatingWebhookConfiguration: cert-manager then renews the Secret and
# keeps the caBundle, and this script is not needed.
set -euo pipefail

NAMESPACE=cloudfs
SERVICE=cloudfs-sidecar-webhook
SECRET=cloudfs-sidecar-webhook-tls
WEBHOOK_CONFIG=cloudfs-sidecar
DEPLOYMENT=cloudfs-sidecar-webhook

dir=""
days=365
use_kubectl=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="${2:?--dir needs a directory}"; shift 2 ;;
    --days) days="${2:?--days needs a number}"; shift 2 ;;
    --no-kubectl) use_kubectl=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "make-certs.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$days" in
  ''|*[!0-9]*) echo "make-certs.sh: --days takes a whole number of days" >&2; exit 2 ;;
esac
if [ -z "$dir" ]; then
  if [ "$use_kubectl" = 0 ]; then
    echo "make-certs.sh: --no-kubectl needs --dir (where to leave the files)" >&2
    exit 2
  fi
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
fi
umask 077
mkdir -p "$dir"

if [ -s "$dir/ca.key" ] && [ -s "$dir/ca.crt" ]; then
  echo "reusing the CA in $dir"
else
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=cloudfs-sidecar-webhook-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt"
fi

host="$SERVICE.$NAMESPACE.svc"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$host" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr"
printf 'subjectAltName=DNS:%s,DNS:%s.cluster.local\nextendedKeyUsage=serverAuth\n' "$host" "$host" \
  >"$dir/tls.ext"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days "$days" -extfile "$dir/tls.ext" -out "$dir/tls.crt"
rm -f "$dir/tls.csr" "$dir/tls.ext"
openssl verify -CAfile "$dir/ca.crt" "$dir/tls.crt" >/dev/null
echo "made $dir/tls.crt for $host (and $host.cluster.local)"

if [ "$use_kubectl" = 0 ]; then
  exit 0
fi

# create --dry-run | apply: the same command makes the Secret or replaces it.
kubectl -n "$NAMESPACE" create secret tls "$SECRET" \
  --cert="$dir/tls.crt" --key="$dir/tls.key" --dry-run=client -o yaml | kubectl apply -f -

ca_bundle="$(base64 <"$dir/ca.crt" | tr -d '\n')"
kubectl patch mutatingwebhookconfiguration "$WEBHOOK_CONFIG" --type=json \
  -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca_bundle\"}]"

if kubectl -n "$NAMESPACE" get deployment "$DEPLOYMENT" >/dev/null 2>&1; then
  kubectl -n "$NAMESPACE" rollout restart deployment "$DEPLOYMENT"
fi
echo "done: the webhook serves the new certificate once its pods have restarted"
