#!/usr/bin/env bash
# Start a throw-away one-node Slurm cluster (with accounting) under one state directory.
#
#   .ci/slurm-up.sh STATE_DIR      # then: export SLURM_CONF=STATE_DIR/etc/slurm.conf
#   .ci/slurm-down.sh STATE_DIR    # stops every daemon this started, by PID
#
# Needs root and the Debian packages slurm-wlm and munge (sbatch, slurmctld, slurmd, munged);
# with mariadb-server and slurmdbd it also runs accounting, so that `sacct` works (the test reads job
# states, comments and requested memory from it). Everything lives under STATE_DIR (its own munge key
# and socket, free TCP ports, its own MariaDB datadir) except one symlink, /etc/slurm/slurm.conf ->
# STATE_DIR/etc/slurm.conf (see below), which slurm-down.sh removes. Daemons are started by hand (apt
# does not start them here); their PIDs go to STATE_DIR/pids/*.pid for slurm-down.sh. About 15 s.
set -euo pipefail

STATE=${1:?usage: slurm-up.sh STATE_DIR}
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
ETC=$STATE/etc PIDS=$STATE/pids LOGS=$STATE/log
mkdir -p "$ETC" "$PIDS" "$LOGS" "$STATE/ctld" "$STATE/spool" "$STATE/munge"

for bin in munged slurmctld slurmd sbatch squeue sinfo; do
  command -v "$bin" >/dev/null || { echo "slurm-up: $bin not found (apt-get install slurm-wlm munge)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "slurm-up: must run as root (slurmd starts jobs as their users)" >&2; exit 2; }

# The executor's job step (snakemake-executor-plugin-slurm-jobstep) drops SLURM_* variables before its
# inner srun, which then looks for the default /etc/slurm/slurm.conf: link ours there (removed by
# slurm-down.sh). An existing one that is not ours is left alone, and we stop.
if [ -e /etc/slurm/slurm.conf ] || [ -L /etc/slurm/slurm.conf ]; then
  if [ "$(readlink /etc/slurm/slurm.conf)" != "$ETC/slurm.conf" ]; then
    echo "slurm-up: /etc/slurm/slurm.conf exists and is not ours; not touching a configured Slurm" >&2
    exit 2
  fi
fi

trap 'echo "slurm-up: failed at line $LINENO: $BASH_COMMAND (logs in $LOGS)" >&2' ERR

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  while [ $SECONDS -lt $deadline ]; do timeout 5 "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "slurm-up: timed out waiting for $what; logs in $LOGS" >&2
  tail -n 20 "$LOGS"/* "$STATE"/mysql/*.log >&2 || true
  exit 1
}

# munge: own key and socket
dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1 count=1024 status=none
chmod 0755 "$STATE/munge"; chmod 0400 "$STATE/munge/munge.key"
munged --force --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
  --pid-file="$PIDS/munged.pid" --log-file="$LOGS/munged.log" --seed-file="$STATE/munge/munge.seed"
wait_for 10 munged test -S "$STATE/munge/munge.socket"

NODE=$(hostname -s)
CPUS=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
MEM=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
CTLD_PORT=$(free_port) SLURMD_PORT=$(free_port) DBD_PORT=$(free_port) DB_PORT=$(free_port)

ACCOUNTING=none
if command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null; then
  ACCOUNTING=slurmdbd
fi

if [ "$ACCOUNTING" = slurmdbd ]; then
  mkdir -p "$STATE/mysql"   # run as root: STATE may sit below a 0700 directory (pytest's tmp_path)
  mariadb-install-db --no-defaults --user=root --datadir="$STATE/mysql/data" --auth-root-authentication-method=normal \
    >"$LOGS/mariadb-install.log" 2>&1
  mariadbd --no-defaults --user=root --datadir="$STATE/mysql/data" --socket="$STATE/mysql/mysql.sock" \
    --port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$STATE/mysql/mariadbd.pid" \
    --log-error="$STATE/mysql/mariadbd.log" --skip-log-bin --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
  echo $! >"$PIDS/mariadbd.pid"
  wait_for 30 mariadbd mariadb --no-defaults -uroot --socket="$STATE/mysql/mysql.sock" -e 'select 1'
  mariadb --no-defaults -uroot --socket="$STATE/mysql/mysql.sock" -e \
    "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
  cat >"$ETC/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$PIDS/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$ETC/slurmdbd.conf"
fi

{
  echo "ClusterName=recrepro"
  echo "SlurmctldHost=$NODE(127.0.0.1)"
  echo "SlurmctldPort=$CTLD_PORT"
  echo "SlurmdPort=$SLURMD_PORT"
  echo "SlurmUser=root"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$STATE/munge/munge.socket"
  echo "CredType=cred/munge"
  echo "StateSaveLocation=$STATE/ctld"
  echo "SlurmdSpoolDir=$STATE/spool"
  echo "SlurmctldPidFile=$PIDS/slurmctld.pid"
  echo "SlurmdPidFile=$PIDS/slurmd.pid"
  echo "SlurmctldLogFile=$LOGS/slurmctld.log"
  echo "SlurmdLogFile=$LOGS/slurmd.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_Core_Memory"
  echo "SchedulerType=sched/backfill"
  echo "MinJobAge=300"
  echo "ReturnToService=2"
  echo "MpiDefault=none"
  echo "JobCompType=jobcomp/none"
  echo "JobAcctGatherType=jobacct_gather/linux"
  echo "JobAcctGatherFrequency=5"
  if [ "$ACCOUNTING" = slurmdbd ]; then
    echo "AccountingStorageType=accounting_storage/slurmdbd"
    echo "AccountingStorageHost=localhost"
    echo "AccountingStoragePort=$DBD_PORT"
    echo "AccountingStoragePass=$STATE/munge/munge.socket"   # the clients' munge socket for slurmdbd
    echo "AccountingStoreFlags=job_comment"                   # sacct shows the plugin's rule_<name> comments
  else
    echo "AccountingStorageType=accounting_storage/none"
  fi
  echo "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"
  echo "PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"
} >"$ETC/slurm.conf"
export SLURM_CONF=$ETC/slurm.conf
mkdir -p /etc/slurm
ln -sfn "$SLURM_CONF" /etc/slurm/slurm.conf

if [ "$ACCOUNTING" = slurmdbd ]; then
  slurmdbd   # reads slurmdbd.conf beside $SLURM_CONF; forks, PID in pids/slurmdbd.pid
  wait_for 30 slurmdbd sacctmgr -n list cluster
  sacctmgr -i add cluster recrepro >/dev/null
  sacctmgr -i add account recrepro Description=ci Organization=ci >/dev/null
  sacctmgr -i add user root DefaultAccount=recrepro >/dev/null
fi
slurmctld -f "$ETC/slurm.conf" -i
wait_for 30 slurmctld scontrol ping
slurmd -f "$ETC/slurm.conf" -N "$NODE"
wait_for 60 "node $NODE idle" bash -c "sinfo -h -N -n '$NODE' -o %T | grep -qx idle"

cat >"$STATE/env.sh" <<EOF
export SLURM_CONF=$ETC/slurm.conf
export RECREPRO_SLURM_ACCOUNTING=$ACCOUNTING
EOF
echo "slurm-up: node $NODE idle (accounting: $ACCOUNTING); source $STATE/env.sh"
