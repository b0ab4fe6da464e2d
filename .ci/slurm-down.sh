#!/usr/bin/env bash
# Stop the daemons .ci/slurm-up.sh STATE_DIR started (by the PIDs it recorded), newest first.
set -uo pipefail
STATE=${1:?usage: slurm-down.sh STATE_DIR}
# Cancel what is still queued or running first: job steps outlive a stopped slurmd.
if [ -s "$STATE/pids/slurmctld.pid" ] && [ -f "$STATE/etc/slurm.conf" ]; then
  export SLURM_CONF=$STATE/etc/slurm.conf
  jobs=$(timeout 10 squeue -h -o %i 2>/dev/null || true)
  if [ -n "$jobs" ]; then
    timeout 10 scancel $jobs 2>/dev/null || true
    for _ in $(seq 60); do [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
  fi
fi
for name in slurmd slurmctld slurmdbd mariadbd munged; do
  pidfile=$STATE/pids/$name.pid
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || continue
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  rm -f "$pidfile"
done
if [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$(cd "$STATE" 2>/dev/null && pwd)/etc/slurm.conf" ]; then
  rm -f /etc/slurm/slurm.conf
fi
exit 0
