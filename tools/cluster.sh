#!/usr/bin/env bash
# A local Kubernetes control plane on loopback (issue 8): etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler from the pinned tools (./dev.sh tools), with the project's own certificates, and
# kwok as the kubelets' stand-in: it keeps the Nodes' leases, runs their Pods (Running, Ready; no
# container) and finishes deletions. Nodes themselves are registered by tools/make_nodes.py.
#   tools/cluster.sh up          start it (a no-op when it is already up and healthy); waits on health
#   tools/cluster.sh down        stop every process (TERM, then KILL) and remove etcd's data
#   tools/cluster.sh status      each component's pid and health; exit 0 only when all are healthy
#   tools/cluster.sh kubeconfig  print the admin kubeconfig's path (user in group system:masters)
#   tools/cluster.sh flags       print each component's command line; starts nothing
# kube-scheduler runs the configuration `python -m infra scheduler` prints for the inventory, the one
# fit simulates (scheduler-config.yaml; CLUSTER_PYTHON, default .venv/bin/python, runs it).
# State is under .state/cluster/ of the checkout: pki/ (kept across down; `down --purge` removes it),
# etcd/, logs/, pids/ and the kubeconfigs. Every listener is on 127.0.0.1. Ports: CLUSTER_ETCD_PORT
# (22379), CLUSTER_ETCD_PEER_PORT (22380), CLUSTER_APISERVER_PORT (26443), CLUSTER_KCM_PORT (20257),
# CLUSTER_SCHEDULER_PORT (20259), CLUSTER_KWOK_PORT (20250); the Service and Pod networks are those of
# inventories/$CLUSTER_INVENTORY (sandbox). CLUSTER_BIN_DIRS overrides where the binaries are found.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=$ROOT/.state/cluster
PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
HOST=127.0.0.1
ETCD_PORT=${CLUSTER_ETCD_PORT:-22379}
ETCD_PEER_PORT=${CLUSTER_ETCD_PEER_PORT:-22380}
APISERVER_PORT=${CLUSTER_APISERVER_PORT:-26443}
KCM_PORT=${CLUSTER_KCM_PORT:-20257}
SCHEDULER_PORT=${CLUSTER_SCHEDULER_PORT:-20259}
KWOK_PORT=${CLUSTER_KWOK_PORT:-20250}
INVENTORY=${CLUSTER_INVENTORY:-sandbox}
TIMEOUT=${CLUSTER_TIMEOUT:-120}
SCHEDULER_CONFIG=$STATE/scheduler-config.yaml
KWOK_CONFIG=$STATE/kwok-config.yaml
# kwok stands in for every kubelet, and each kubelet marks its own pods Running and Ready, all at once across a
# cluster; kwok's default runs 4 pods' stages at a time, which made the 1,000 pods of a DaemonSet over 1,000
# Nodes Ready at ~36 a second. CLUSTER_KWOK_POD_PARALLELISM=4 gives kwok's default back.
KWOK_POD_PARALLELISM=${CLUSTER_KWOK_POD_PARALLELISM:-32}
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# The controller manager's client rate: its default (20 requests/s, bursts of 30) is sized for small
# clusters, and a DaemonSet then creates its pods at 20 a second, 50 s for 1,000 Nodes. Upstream's own
# 5,000-node scale validation runs it at 100/100 (sig-release's scalability validation reports), as a control
# plane for thousands of Nodes does; CLUSTER_KCM_QPS=20 CLUSTER_KCM_BURST=30 gives the default back.
KCM_QPS=${CLUSTER_KCM_QPS:-100}
KCM_BURST=${CLUSTER_KCM_BURST:-100}
# The admission plugins a production cluster runs: kube-apiserver 1.34's default-on set
# (pkg/kubeapiserver/options/plugins.go, DefaultOffAdmissionPlugins) written out, plus NodeRestriction,
# which kubeadm and Kubespray add. Written out so that a changed upstream default does not go unseen.
ADMISSION_PLUGINS=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass
ADMISSION_PLUGINS+=,PersistentVolumeClaimResize,DefaultTolerationSeconds,MutatingAdmissionWebhook
ADMISSION_PLUGINS+=,ValidatingAdmissionWebhook,ResourceQuota,StorageObjectInUseProtection,Priority
ADMISSION_PLUGINS+=,TaintNodesByCondition,RuntimeClass,CertificateApproval,CertificateSigning
ADMISSION_PLUGINS+=,ClusterTrustBundleAttest,CertificateSubjectRestriction,DefaultIngressClass
ADMISSION_PLUGINS+=,PodSecurity,PodTopologyLabels,MutatingAdmissionPolicy,ValidatingAdmissionPolicy
ADMISSION_PLUGINS+=,NodeRestriction

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "cluster: $*" >&2; exit 1; }

T0=$(date +%s.%N)
STEP_T=$T0
# step MESSAGE: prints the seconds the previous step took and the total so far.
step() {
  local now
  now=$(date +%s.%N)
  awk -v m="$1" -v a="$STEP_T" -v b="$now" -v t="$T0" \
    'BEGIN { printf "cluster: %-44s (+%.1f s, %.1f s)\n", m, b - a, b - t }' >&2
  STEP_T=$now
}

# An address range of the inventory, as Kubespray reads it (group_vars/all.yml or group_vars/all/):
# kube_service_addresses (the Service network) unless another variable is named.
service_cidr() {
  local dir=$ROOT/inventories/$INVENTORY/group_vars value var=${1:-kube_service_addresses}
  value=$(cat "$dir"/all.yml "$dir"/all/*.yml 2>/dev/null \
    | sed -n "s/^$var:[[:space:]]*\([0-9./]*\).*/\1/p" | head -n1)
  [ -n "$value" ] || die "no $var in inventories/$INVENTORY/group_vars/all"
  echo "$value"
}

# The first address of an IPv4 CIDR: the `kubernetes` Service's ClusterIP, a SAN of the API server.
first_ip() {
  local ip=${1%/*} bits=${1#*/} a b c d n
  IFS=. read -r a b c d <<<"$ip"
  n=$(((a << 24 | b << 16 | c << 8 | d) & (0xffffffff << (32 - bits) & 0xffffffff)))
  n=$((n + 1))
  echo "$((n >> 24 & 255)).$((n >> 16 & 255)).$((n >> 8 & 255)).$((n & 255))"
}

# kwok_config: kwok's options. A KwokConfiguration document sets every option it names and zeroes the rest (a
# zero node-lease parallelism stops kwok), so the others are kwok 0.8's defaults, written out.
kwok_config() {
  printf '%s\n' "apiVersion: config.kwok.x-k8s.io/v1alpha1" "kind: KwokConfiguration" "options:" \
    "  podPlayStageParallelism: $KWOK_POD_PARALLELISM" "  nodePlayStageParallelism: 4" \
    "  nodeLeaseParallelism: 4" "  podsOnNodeSyncParallelism: 1" "  enablePodsOnNodeSyncListPager: true" \
    "  enablePodsOnNodeSyncStreamWatch: false" >"$KWOK_CONFIG"
}

# scheduler_config: the inventory's kube-scheduler configuration (what fit simulates) with this control
# plane's connection to the API server (with --config, kube-scheduler ignores --kubeconfig and --profiling).
scheduler_config() {
  local python=${CLUSTER_PYTHON:-$ROOT/.venv/bin/python} config
  config=$(cd "$ROOT" && "$python" -m infra scheduler "inventories/$INVENTORY" 2>"$STATE/scheduler-config.err") \
    || die "python -m infra scheduler inventories/$INVENTORY failed: $(tail -n 20 "$STATE/scheduler-config.err")"
  printf '%s\nclientConnection:\n  kubeconfig: %s\nleaderElection:\n  leaderElect: false\nenableProfiling: false\n' \
    "$config" "$STATE/scheduler.kubeconfig" >"$SCHEDULER_CONFIG"
}

bin_dirs() {
  if [ -n "${CLUSTER_BIN_DIRS:-}" ]; then
    tr ':' '\n' <<<"$CLUSTER_BIN_DIRS"
  else
    TOOLS_FAMILIES="etcd kubernetes kwok" "$ROOT/tools/build.sh" --print-path
  fi
}

binary() {
  local dir
  while read -r dir; do
    if [ -x "$dir/$1" ]; then echo "$dir/$1"; return; fi
  done < <(bin_dirs)
  echo "$1"  # not built: `flags` still prints a command line, `up` refuses
}

# flags COMPONENT: its command line, one word a line.
flags() {
  case "$1" in
    etcd)
      printf '%s\n' "$(binary etcd)" --name=local --data-dir="$STATE/etcd" \
        --listen-client-urls="https://$HOST:$ETCD_PORT" --advertise-client-urls="https://$HOST:$ETCD_PORT" \
        --listen-peer-urls="http://$HOST:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls="http://$HOST:$ETCD_PEER_PORT" \
        --initial-cluster="local=http://$HOST:$ETCD_PEER_PORT" \
        --client-cert-auth=true --trusted-ca-file="$PKI/etcd-ca.crt" \
        --cert-file="$PKI/etcd-server.crt" --key-file="$PKI/etcd-server.key" \
        --unsafe-no-fsync=true --quota-backend-bytes=2147483648 --auto-compaction-retention=1 \
        --log-level=warn
      ;;
    kube-apiserver)
      printf '%s\n' "$(binary kube-apiserver)" \
        --bind-address=$HOST --advertise-address=$HOST --secure-port="$APISERVER_PORT" \
        --cert-dir="$PKI" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
        --client-ca-file="$PKI/ca.crt" \
        --etcd-servers="https://$HOST:$ETCD_PORT" --etcd-cafile="$PKI/etcd-ca.crt" \
        --etcd-certfile="$PKI/apiserver-etcd-client.crt" --etcd-keyfile="$PKI/apiserver-etcd-client.key" \
        --service-cluster-ip-range="$SERVICE_CIDR" \
        --enable-admission-plugins="$ADMISSION_PLUGINS" \
        --authorization-mode=Node,RBAC \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
        --allow-privileged=true --profiling=false
      ;;
    kube-controller-manager)
      printf '%s\n' "$(binary kube-controller-manager)" \
        --bind-address=$HOST --secure-port="$KCM_PORT" \
        --kubeconfig="$STATE/controller-manager.kubeconfig" \
        --authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
        --authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
        --client-ca-file="$PKI/ca.crt" --root-ca-file="$PKI/ca.crt" \
        --service-account-private-key-file="$PKI/sa.key" --use-service-account-credentials=true \
        --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
        --controllers='*' --node-monitor-grace-period=8760h \
        --kube-api-qps="$KCM_QPS" --kube-api-burst="$KCM_BURST" \
        --leader-elect=false --profiling=false
      ;;
    kube-scheduler)
      printf '%s\n' "$(binary kube-scheduler)" \
        --bind-address=$HOST --secure-port="$SCHEDULER_PORT" --config="$SCHEDULER_CONFIG" \
        --authentication-kubeconfig="$STATE/scheduler.kubeconfig" \
        --authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
        --leader-elect=false --profiling=false
      ;;
    kwok)
      # Every Node is a fake one here; pod IPs come from the inventory's Pod network. Its stages
      # (kwok-stages.yaml, built beside it from tools/kwok/stages.txt) say what it does.
      printf '%s\n' "$(binary kwok)" --config="$(dirname "$(binary kwok)")/kwok-stages.yaml" \
        --config="$KWOK_CONFIG" \
        --kubeconfig="$STATE/admin.kubeconfig" --manage-all-nodes=true \
        --server-address="$HOST:$KWOK_PORT" --cidr="$POD_CIDR" --node-ip=$HOST \
        --node-lease-duration-seconds=40
      ;;
  esac
}

# ---- certificates -------------------------------------------------------------------------------

# cert NAME CA SUBJECT USAGE [SAN]: an EC P-256 key and a certificate signed by CA (self-signed when
# CA is "-"); USAGE is ca, server, client or both.
cert() {
  local name=$1 ca=$2 subject=$3 usage=$4 san=${5:-} ext
  case "$usage" in
    ca) ext="basicConstraints=critical,CA:TRUE"$'\n'"keyUsage=critical,keyCertSign,cRLSign,digitalSignature" ;;
    server) ext="extendedKeyUsage=serverAuth" ;;
    client) ext="extendedKeyUsage=clientAuth" ;;
    both) ext="extendedKeyUsage=serverAuth,clientAuth" ;;
  esac
  if [ "$usage" != ca ]; then
    ext+=$'\n'"basicConstraints=critical,CA:FALSE"$'\n'"keyUsage=critical,digitalSignature,keyEncipherment"
  fi
  [ -z "$san" ] || ext+=$'\n'"subjectAltName=$san"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  if [ "$ca" = - ]; then
    openssl req -x509 -new -key "$PKI/$name.key" -subj "$subject" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$PKI/$name.crt" 2>/dev/null
  else
    openssl req -new -key "$PKI/$name.key" -subj "$subject" 2>/dev/null \
      | openssl x509 -req -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial -days 365 -sha256 \
        -extfile <(echo "$ext") -out "$PKI/$name.crt" 2>/dev/null
  fi
}

certificates() {
  local san
  if [ -f "$PKI/.complete" ]; then
    step "certificates: cached in $PKI"
    return
  fi
  rm -rf "$PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  cert ca - "/CN=k8s-node-pools-local-ca" ca
  cert etcd-ca - "/CN=k8s-node-pools-local-etcd-ca" ca
  cert etcd-server etcd-ca "/CN=etcd-local" both "IP:$HOST,DNS:localhost"
  cert apiserver-etcd-client etcd-ca "/CN=kube-apiserver-etcd-client" client
  san="IP:$HOST,IP:$(first_ip "$SERVICE_CIDR"),DNS:localhost,DNS:kubernetes,DNS:kubernetes.default"
  san+=",DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver ca "/CN=kube-apiserver" server "$san"
  cert admin ca "/O=system:masters/CN=kubernetes-admin" client
  cert controller-manager ca "/CN=system:kube-controller-manager" client
  cert scheduler ca "/CN=system:kube-scheduler" client
  # The service-account key pair: the API server signs and checks tokens, the controller manager signs.
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
  openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI"/*.key
  touch "$PKI/.complete"
  step "certificates: generated in $PKI"
}

kubeconfig_for() {
  local user=$1 file=$STATE/$1.kubeconfig
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://$HOST:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $user
  user:
    client-certificate: $PKI/$user.crt
    client-key: $PKI/$user.key
contexts:
- name: local
  context: {cluster: local, user: $user}
current-context: local
EOF
  chmod 600 "$file"
}

# ---- processes and health -----------------------------------------------------------------------

# pid_of COMPONENT: its recorded pid when that process is alive and is still the binary started.
pid_of() {
  local pid
  [ -f "$PIDS/$1.pid" ] || return 1
  pid=$(cat "$PIDS/$1.pid")
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$STATE" || return 1
  echo "$pid"
}

healthy() {
  local c=(curl -sf --max-time 3 -o /dev/null)
  case "$1" in
    etcd) "${c[@]}" --cacert "$PKI/etcd-ca.crt" --cert "$PKI/apiserver-etcd-client.crt" \
      --key "$PKI/apiserver-etcd-client.key" "https://$HOST:$ETCD_PORT/health" ;;
    kube-apiserver) "${c[@]}" --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
      "https://$HOST:$APISERVER_PORT/readyz" ;;
    kube-controller-manager) "${c[@]}" -k "https://$HOST:$KCM_PORT/healthz" ;;
    kube-scheduler) "${c[@]}" -k "https://$HOST:$SCHEDULER_PORT/livez" ;;
    kwok) "${c[@]}" "http://$HOST:$KWOK_PORT/healthz" ;;
  esac
}

port_of() {
  case "$1" in
    etcd) echo "$ETCD_PORT $ETCD_PEER_PORT" ;;
    kube-apiserver) echo "$APISERVER_PORT" ;;
    kube-controller-manager) echo "$KCM_PORT" ;;
    kube-scheduler) echo "$SCHEDULER_PORT" ;;
    kwok) echo "$KWOK_PORT" ;;
  esac
}

ports_free() {
  local component port
  for component in "${COMPONENTS[@]}"; do
    for port in $(port_of "$component"); do
      if [ -n "$(ss -Hltn "sport = :$port")" ]; then
        die "port $port (for $component) is taken: $(ss -Hltnp "sport = :$port" | head -n1)"
      fi
    done
  done
}

start() {
  local component=$1 bin cmd
  mapfile -t cmd < <(flags "$component")
  bin=${cmd[0]}
  [ -x "$bin" ] || die "$component is not built; run: TOOLS_FAMILIES=\"etcd kubernetes kwok\" ./dev.sh tools"
  # Detached: a session of its own, no terminal; the pid is that of the binary itself (setsid execs
  # without forking, since a background job of a non-interactive shell leads no process group).
  setsid nohup "${cmd[@]}" >"$LOGS/$component.log" 2>&1 </dev/null &
  echo $! >"$PIDS/$component.pid"
}

wait_healthy() {
  local component=$1 deadline=$((SECONDS + TIMEOUT))
  until healthy "$component"; do
    # kill -0, not pid_of: until setsid has exec'ed the binary, the pid's command line is still this
    # script's, and pid_of (which checks it, against a recycled pid) would call a starting process dead.
    if ! kill -0 "$(cat "$PIDS/$component.pid")" 2>/dev/null; then
      fail "$component exited"
    elif [ "$SECONDS" -ge "$deadline" ]; then
      fail "$component not healthy after ${TIMEOUT} s"
    fi
    sleep 0.2
  done
  step "$component healthy (pid $(pid_of "$component"))"
}

fail() {
  echo "cluster: $1; the last lines of $LOGS/$component.log:" >&2
  tail -n 25 "$LOGS/$component.log" >&2 || true
  echo "cluster: stopping what was started (logs are kept in $LOGS)" >&2
  stop_all
  exit 1
}

stop_all() {
  local i component pid pids=() waited
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    component=${COMPONENTS[i]}
    if pid=$(pid_of "$component"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$PIDS/$component.pid"
  done
  for pid in "${pids[@]}"; do
    waited=0
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$waited" -ge 100 ]; then
        echo "cluster: pid $pid ignored TERM for 10 s; KILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.1
      waited=$((waited + 1))
    done
  done
  rm -rf "$STATE/etcd"
}

all_healthy() {
  local component
  for component in "${COMPONENTS[@]}"; do
    if ! pid_of "$component" >/dev/null || ! healthy "$component"; then
      return 1
    fi
  done
}

# ---- commands -----------------------------------------------------------------------------------

up() {
  local component
  if all_healthy; then
    step "already up and healthy; nothing to do"
    return
  fi
  if ls "$PIDS"/*.pid >/dev/null 2>&1; then
    echo "cluster: a partial or unhealthy control plane is left over; stopping it first" >&2
    stop_all
  fi
  for component in "${COMPONENTS[@]}"; do
    [ -x "$(binary "$component")" ] \
      || die "$component is not built; run: TOOLS_FAMILIES=\"etcd kubernetes kwok\" ./dev.sh tools"
  done
  mkdir -p "$STATE" "$LOGS" "$PIDS"
  rm -rf "$STATE/etcd"
  ports_free
  certificates
  kubeconfig_for admin
  kubeconfig_for controller-manager
  kubeconfig_for scheduler
  scheduler_config
  kwok_config
  for component in "${COMPONENTS[@]}"; do
    start "$component"
    wait_healthy "$component"
  done
  step "up: kubeconfig $STATE/admin.kubeconfig"
}

down() {
  stop_all
  rm -rf "$PIDS"
  if [ "${1:-}" = --purge ]; then
    rm -rf "$STATE"
  fi
  step "down"
}

status() {
  local component pid rc=0
  for component in "${COMPONENTS[@]}"; do
    if pid=$(pid_of "$component"); then
      if healthy "$component"; then
        echo "$component: pid $pid, healthy, rss $(awk '/VmRSS/ {print $2, $3}' "/proc/$pid/status")"
      else
        echo "$component: pid $pid, NOT healthy"
        rc=1
      fi
    else
      echo "$component: not running"
      rc=1
    fi
  done
  return "$rc"
}

# Read once here: a failure inside $(...) or <(...) further down would not stop the script.
case "${1:-}" in
  up | flags) SERVICE_CIDR=$(service_cidr); POD_CIDR=$(service_cidr kube_pods_subnet) ;;
esac
case "${1:-}" in
  up) up ;;
  down) down "${2:-}" ;;
  status) status ;;
  kubeconfig) echo "$STATE/admin.kubeconfig" ;;
  flags)
    for component in "${COMPONENTS[@]}"; do
      flags "$component" | paste -sd' '
    done
    ;;
  -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
