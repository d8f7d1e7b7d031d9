#!/usr/bin/env bash
# slurm-local.sh -- install and run a real single-node SLURM (+ munge) on this
# machine, without systemd or cgroups, for end-to-end tests (dask-jobqueue).
#
# Usage: slurm-local.sh [--no-install] {start|stop} [--record FILE]
#        slurm-local.sh [--no-install] around COMMAND [ARG...]
#        slurm-local.sh {status|restart|logs|conf}
#
#   start    install packages if missing (apt-get), create the munge key if
#            missing, start munged, write slurm.conf, start slurmctld + slurmd
#            directly (no systemctl) and wait until the node is idle.
#            Idempotent: daemons already running are used as they are (a
#            running SLURM is never restarted: `restart` applies a new config).
#            --record FILE: FILE lists the daemons this call started (name,
#            pid, start time), and nothing when SLURM was already running.
#   stop     cancel the jobs and stop slurmd, slurmctld and munged, those that
#            this script started (their pid files in LDPSIM_SLURM_DIR); a
#            daemon started otherwise is left alone. Idempotent.
#            --record FILE: stop only the daemons FILE lists (a start with the
#            same FILE started them); a SLURM that was running before that
#            start stays running.
#   around   start --record, run COMMAND (also when SLURM is unavailable: the
#            tests marked slurm skip), stop --record; exit with COMMAND's
#            status. `make test` runs its pytest processes this way.
#   status   exit 0 if the node is up (idle/mixed/allocated/completing).
#   restart  stop + start.
#   logs     print the tail of every daemon log (for test failure reports).
#   conf     print the slurm.conf that start would write.
#
# Environment:
#   LDPSIM_SLURM_DIR           state/spool/pid/log dir     [/tmp/ldpsim-slurm]
#   LDPSIM_SLURM_SKIP_INSTALL  1: never run apt-get (same as --no-install);
#                              fails if the binaries are missing
#   LDPSIM_SLURM_TIMEOUT       seconds to wait for the node to be idle [60]
#   LDPSIM_SLURM_CPUS          CPUs advertised for the node [detected]; a value
#                              above the real count oversubscribes the machine
#                              (SlurmdParameters=config_overrides)
#   LDPSIM_SLURM_MEMORY_MB     RealMemory of the node [detected minus 5%]
#   LDPSIM_SLURM_PARTITION     partition name [debug]
#   SLURM_CONF                 where slurm.conf is written [/etc/slurm/slurm.conf]
#
# Exit codes: 0 ok, 1 failure, 2 usage, 3 packages missing / install failed,
#             4 a daemon failed to start, 5 node not idle in time,
#             6 not root and no passwordless sudo.
set -euo pipefail

PROG=$(basename "$0")
SLURM_DIR=${LDPSIM_SLURM_DIR:-/tmp/ldpsim-slurm}
SKIP_INSTALL=${LDPSIM_SLURM_SKIP_INSTALL:-0}
TIMEOUT=${LDPSIM_SLURM_TIMEOUT:-60}
PARTITION=${LDPSIM_SLURM_PARTITION:-debug}
CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
CLUSTER_NAME=ldpsim
NODE=$(hostname -s)

LOG_DIR=$SLURM_DIR/log
RUN_DIR=$SLURM_DIR/run
STATE_DIR=$SLURM_DIR/state
SPOOL_DIR=$SLURM_DIR/spool
MUNGE_LOG_DIR=$LOG_DIR/munge
MUNGE_KEY=/etc/munge/munge.key
MUNGE_RUN=/run/munge
# The pid files of the daemons this script starts (munged writes its own as the
# munge user, hence its folder): a daemon without one here was started by
# someone else, and stop leaves it alone.
MUNGE_PID=$RUN_DIR/munge/munged.pid
CTLD_PID=$RUN_DIR/slurmctld.pid
SLURMD_PID=$RUN_DIR/slurmd.pid
# start --record FILE / stop --record FILE
RECORD=""

PACKAGES=(munge slurmctld slurmd slurm-client)
BINARIES=(munged munge unmunge slurmctld slurmd sinfo squeue sbatch srun scancel scontrol)

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { local rc=$1; shift; printf '%s: ERROR: %s\n' "$PROG" "$*" >&2; exit "$rc"; }

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

need_root() {
    [[ $EUID -eq 0 ]] && return 0
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        exec sudo -n env \
            LDPSIM_SLURM_DIR="$SLURM_DIR" LDPSIM_SLURM_SKIP_INSTALL="$SKIP_INSTALL" \
            LDPSIM_SLURM_TIMEOUT="$TIMEOUT" LDPSIM_SLURM_PARTITION="$PARTITION" \
            LDPSIM_SLURM_CPUS="${LDPSIM_SLURM_CPUS:-}" \
            LDPSIM_SLURM_MEMORY_MB="${LDPSIM_SLURM_MEMORY_MB:-}" \
            SLURM_CONF="$CONF" bash "$0" "${ORIG_ARGS[@]}"
    fi
    die 6 "must run as root (or with passwordless sudo)"
}

# ---------------------------------------------------------------- processes
# alive PID: process exists and is not a zombie (daemonizing parents linger
# as zombies until init reaps them)
alive() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# start_time PID: the process's start time (clock ticks since boot); with the
# pid, it names one process (a pid is reused, the pair is not).
start_time() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# is_process PID NAME [START]: PID is a live process whose command name is
# NAME (and, if given, started at START).
is_process() {
    local pid=$1 name=$2 start=${3:-}
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]] || return 1
    alive "$pid" || return 1
    [[ -z $start || $(start_time "$pid") == "$start" ]]
}

# pid_alive PIDFILE NAME -> prints pid and returns 0 if PIDFILE names a live
# process whose command name is NAME.
pid_alive() {
    local file=$1 name=$2 pid
    [[ -r $file ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    is_process "$pid" "$name" || return 1
    echo "$pid"
}

# pids of live processes with exactly this command name: daemons this script
# did not start are looked for only to leave them alone (start refuses to run
# a second one) or, right after apt-get started them, to stop them.
pids_by_name() {
    local p
    for p in $(pgrep -x "$1" 2>/dev/null || true); do
        alive "$p" && echo "$p"
    done
    return 0
}

# record_started NAME PIDFILE: note in the record (start --record FILE) that
# this call started the daemon whose pid PIDFILE holds.
record_started() {
    local name=$1 pid
    pid=$(pid_alive "$2" "$name") || return 0
    [[ -n $RECORD ]] || return 0
    echo "$name $pid $(start_time "$pid")" >>"$RECORD"
}

# recorded NAME -> the pid of the daemon NAME the record lists, if it still runs
# (same pid and start time).
recorded() {
    local name pid start
    [[ -r $RECORD ]] || return 1
    while read -r name pid start; do
        [[ $name == "$1" ]] && is_process "$pid" "$name" "$start" && { echo "$pid"; return 0; }
    done <"$RECORD"
    return 1
}

# stop_pids NAME PID...: SIGTERM, wait up to 15 s, then SIGKILL.
stop_pids() {
    local name=$1 pid i any
    shift
    (($#)) || return 0
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 150; i++)); do
        any=0
        for pid in "$@"; do alive "$pid" && any=1; done
        ((any)) || break
        sleep 0.1
    done
    for pid in "$@"; do
        if alive "$pid"; then
            log "$name ($pid) ignored SIGTERM, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    log "stopped $name ($*)"
}

# stop_daemon NAME PIDFILE: stop the daemon whose pid file this script's
# start wrote (nothing if it is not running), and remove the pid file.
stop_daemon() {
    local pid
    pid=$(pid_alive "$2" "$1" || true)
    [[ -z $pid ]] || stop_pids "$1" "$pid"
    rm -f "$2"
}

# kill_owned_steps: kill the job step daemons started by this script's slurmd
# (they write to its log), which a slurmd killed while jobs run leaves behind.
kill_owned_steps() {
    local p
    for p in $(pids_by_name slurmstepd); do
        if find "/proc/$p/fd" -lname "$LOG_DIR/slurmd.log" 2>/dev/null | grep -q .; then
            kill -KILL "$p" 2>/dev/null || true
            log "killed slurmstepd ($p)"
        fi
    done
    return 0
}

# ---------------------------------------------------------------- install
missing_binaries() {
    local b out=()
    for b in "${BINARIES[@]}"; do
        command -v "$b" >/dev/null 2>&1 || [[ -x /usr/sbin/$b ]] || out+=("$b")
    done
    echo "${out[*]:-}"
}

ensure_installed() {
    local missing
    missing=$(missing_binaries)
    [[ -z $missing ]] && return 0
    if [[ $SKIP_INSTALL == 1 ]]; then
        die 3 "missing binaries ($missing) and install is disabled (LDPSIM_SLURM_SKIP_INSTALL=1 / --no-install)"
    fi
    command -v apt-get >/dev/null 2>&1 || die 3 "missing binaries ($missing) and apt-get is not available"
    log "installing ${PACKAGES[*]} (missing: $missing)"
    local t0=$SECONDS aptlog=$LOG_DIR/apt-get.log name new pid
    local -A before
    for name in munged slurmctld slurmd; do before[$name]=" $(pids_by_name "$name" | xargs) "; done
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
    } >"$aptlog" 2>&1 || { tail -n 30 "$aptlog" >&2; die 3 "apt-get failed (full log: $aptlog)"; }
    missing=$(missing_binaries)
    [[ -z $missing ]] || die 3 "still missing after install: $missing"
    log "installed in $((SECONDS - t0)) s"
    # Without a policy-rc.d, the packages' scripts start their daemons (with
    # their own config): this install started them, so it stops them, and the
    # daemons started below are recorded as this script's.
    for name in slurmd slurmctld munged; do
        new=()
        for pid in $(pids_by_name "$name"); do
            [[ ${before[$name]} == *" $pid "* ]] || new+=("$pid")
        done
        ((${#new[@]} == 0)) || { log "the package's scripts started $name"; stop_pids "$name" "${new[@]}"; }
    done
}

# ---------------------------------------------------------------- munge
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    if [[ ! -s $MUNGE_KEY ]]; then
        log "creating munge key $MUNGE_KEY"
        install -d -o munge -g munge -m 0700 "$(dirname "$MUNGE_KEY")"
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --force --keyfile="$MUNGE_KEY"
        else
            dd if=/dev/urandom of="$MUNGE_KEY" bs=1024 count=1 status=none
        fi
    fi
    chown munge:munge "$MUNGE_KEY"
    chmod 0400 "$MUNGE_KEY"
    if munge_ok; then
        return 0  # ours, or one started otherwise: used as it is
    fi
    # Ours, hung, is restarted; one started otherwise is not ours to stop.
    stop_daemon munged "$MUNGE_PID"
    local foreign
    foreign=$(pids_by_name munged | xargs)
    [[ -z $foreign ]] || die 4 "a munged not started by this script is running (pid $foreign) but 'munge -n | unmunge' fails with it; stop it or repair it"
    install -d -o munge -g munge -m 0755 "$MUNGE_RUN" "$(dirname "$MUNGE_PID")"
    install -d -o munge -g munge -m 0700 /var/lib/munge
    install -d -o munge -g munge -m 0755 "$MUNGE_LOG_DIR"
    rm -f "$MUNGE_RUN"/munge.socket.2 "$MUNGE_RUN"/munge.socket.2.lock
    runuser -u munge -- munged --force --pid-file="$MUNGE_PID" \
        --log-file="$MUNGE_LOG_DIR/munged.log" >>"$LOG_DIR/munged.stderr" 2>&1 ||
        { tail -n 20 "$MUNGE_LOG_DIR/munged.log" "$LOG_DIR/munged.stderr" >&2 2>/dev/null || true
          die 4 "munged failed to start (log: $MUNGE_LOG_DIR/munged.log)"; }
    local i
    for ((i = 0; i < 50; i++)); do munge_ok && break; sleep 0.1; done
    record_started munged "$MUNGE_PID"
    munge_ok || die 4 "munged started but munge -n | unmunge fails (log: $MUNGE_LOG_DIR/munged.log)"
    log "munged running (pid $(cat "$MUNGE_PID" 2>/dev/null || echo '?'))"
}

# ---------------------------------------------------------------- config
detect_hw() {
    # slurmd -C prints e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1
    # CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
    local line kv
    line=$(slurmd -C 2>/dev/null | head -n1) || true
    HW_CPUS=$(nproc); HW_SOCKETS=1; HW_CORES=$HW_CPUS; HW_THREADS=1
    HW_MEM=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
    for kv in $line; do
        case $kv in
            CPUs=*) HW_CPUS=${kv#*=} ;;
            SocketsPerBoard=*) HW_SOCKETS=${kv#*=} ;;
            CoresPerSocket=*) HW_CORES=${kv#*=} ;;
            ThreadsPerCore=*) HW_THREADS=${kv#*=} ;;
            RealMemory=*) HW_MEM=${kv#*=} ;;
        esac
    done
}

render_conf() {
    detect_hw
    local cpus=${LDPSIM_SLURM_CPUS:-$HW_CPUS} topo overrides=""
    local mem=${LDPSIM_SLURM_MEMORY_MB:-}
    if [[ -z $mem ]]; then
        # keep RealMemory below what slurmd reports, else the node is drained
        # ("Low RealMemory")
        local margin=$((HW_MEM / 20)); ((margin < 256)) && margin=256
        mem=$((HW_MEM - margin))
    fi
    [[ $cpus =~ ^[1-9][0-9]*$ ]] || die 2 "LDPSIM_SLURM_CPUS must be a positive integer, got '$cpus'"
    [[ $mem =~ ^[1-9][0-9]*$ ]] || die 2 "LDPSIM_SLURM_MEMORY_MB must be a positive integer, got '$mem'"
    if [[ $cpus == "$HW_CPUS" ]]; then
        topo="Sockets=$HW_SOCKETS CoresPerSocket=$HW_CORES ThreadsPerCore=$HW_THREADS"
    else
        topo="Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1"
        overrides="SlurmdParameters=config_overrides"
    fi
    # default memory per allocated CPU for jobs that give no --mem, so that
    # such jobs don't grab the whole node
    local defmem=$((mem / cpus)); ((defmem > 1024)) && defmem=1024
    cat <<EOF
# Generated by cluster/slurm-local.sh -- single-node test cluster, do not edit.
ClusterName=$CLUSTER_NAME
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE_DIR
SlurmdSpoolDir=$SPOOL_DIR
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups, no accounting
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# schedule cores and memory, so several small jobs share the node
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$defmem
${overrides}
ReturnToService=2
SlurmctldTimeout=60
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
SchedulerParameters=batch_sched_delay=0,bf_interval=5
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$cpus $topo RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

# write_conf -> returns 0 if the file changed
write_conf() {
    local tmp
    tmp=$(mktemp)
    render_conf >"$tmp"
    mkdir -p "$(dirname "$CONF")"
    if [[ -f $CONF ]] && cmp -s "$tmp" "$CONF"; then
        rm -f "$tmp"
        return 1
    fi
    install -m 0644 "$tmp" "$CONF"
    rm -f "$tmp"
    cp "$CONF" "$SLURM_DIR/slurm.conf"
    log "wrote $CONF"
    return 0
}

# ---------------------------------------------------------------- slurm
# The node's state; nothing when no slurmctld runs here (slurm.conf names this
# host's), without waiting for sinfo's retries.
node_state() {
    [[ -n $(pids_by_name slurmctld) ]] || return 0
    sinfo -h -N -n "$NODE" -o %T 2>/dev/null | head -n1 || true
}

ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

start_slurmctld() {
    if pid_alive "$CTLD_PID" slurmctld >/dev/null; then return 0; fi
    local foreign
    foreign=$(pids_by_name slurmctld | tr '\n' ' ')
    [[ -z ${foreign// /} ]] || die 4 "a slurmctld not started by this script is running (pid $foreign); this script leaves it alone: stop it first"
    slurmctld -f "$CONF" >>"$LOG_DIR/slurmctld.stderr" 2>&1 ||
        { tail -n 20 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmctld.stderr" >&2 2>/dev/null || true
          die 4 "slurmctld failed to start (log: $LOG_DIR/slurmctld.log)"; }
    local i
    for ((i = 0; i < 300; i++)); do ctld_up && break; sleep 0.1; done
    record_started slurmctld "$CTLD_PID"
    ctld_up || { tail -n 20 "$LOG_DIR/slurmctld.log" >&2 2>/dev/null || true
                 die 4 "slurmctld not answering 'scontrol ping' after 30 s (log: $LOG_DIR/slurmctld.log)"; }
    log "slurmctld running (pid $(cat "$CTLD_PID"))"
}

start_slurmd() {
    if pid_alive "$SLURMD_PID" slurmd >/dev/null; then return 0; fi
    local foreign
    foreign=$(pids_by_name slurmd | tr '\n' ' ')
    [[ -z ${foreign// /} ]] || die 4 "a slurmd not started by this script is running (pid $foreign); this script leaves it alone: stop it first"
    slurmd -f "$CONF" -N "$NODE" >>"$LOG_DIR/slurmd.stderr" 2>&1 ||
        { tail -n 20 "$LOG_DIR/slurmd.log" "$LOG_DIR/slurmd.stderr" >&2 2>/dev/null || true
          die 4 "slurmd failed to start (log: $LOG_DIR/slurmd.log)"; }
    local i
    for ((i = 0; i < 100; i++)); do pid_alive "$SLURMD_PID" slurmd >/dev/null && break; sleep 0.1; done
    record_started slurmd "$SLURMD_PID"
    pid_alive "$SLURMD_PID" slurmd >/dev/null ||
        { tail -n 20 "$LOG_DIR/slurmd.log" >&2 2>/dev/null || true
          die 4 "slurmd exited right after start (log: $LOG_DIR/slurmd.log)"; }
    log "slurmd running (pid $(cat "$SLURMD_PID"))"
}

wait_idle() {
    local deadline=$((SECONDS + TIMEOUT)) st resumed=0
    while :; do
        st=$(node_state)
        case $st in
            idle | mixed | allocated | completing) echo "$st"; return 0 ;;
            down* | drain* | fail*)
                if ((!resumed)); then
                    log "node $NODE is '$st', resuming it"
                    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
                    resumed=1
                fi ;;
        esac
        if ((SECONDS >= deadline)); then
            log "node $NODE is '${st:-unknown}' after ${TIMEOUT}s; reason: $(sinfo -h -R -n "$NODE" -o %E 2>/dev/null || true)"
            tail -n 15 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 2>/dev/null || true
            return 1
        fi
        sleep 0.5
    done
}

status_line() {
    local st ctld slurmd munged
    ctld=$(pid_alive "$CTLD_PID" slurmctld || echo -)
    slurmd=$(pid_alive "$SLURMD_PID" slurmd || echo -)
    munged=$(pid_alive "$MUNGE_PID" munged || pids_by_name munged | xargs)
    munged=${munged:--}
    st=$(node_state)
    echo "slurm-local: node=$NODE state=${st:-unreachable} partition=$PARTITION" \
         "slurmctld=$ctld slurmd=$slurmd munged=$munged conf=$CONF logs=$LOG_DIR"
}

# ---------------------------------------------------------------- commands
cmd_start() {
    need_root
    local t0=$SECONDS
    mkdir -p "$LOG_DIR" "$RUN_DIR" "$STATE_DIR" "$SPOOL_DIR"
    chmod 0755 "$SLURM_DIR" "$LOG_DIR"
    [[ -z $RECORD ]] || : >"$RECORD"
    ensure_installed
    start_munge
    if pid_alive "$CTLD_PID" slurmctld >/dev/null || pid_alive "$SLURMD_PID" slurmd >/dev/null; then
        # Someone may be using it: a running SLURM is not restarted, and its
        # slurm.conf stays the one its daemons read.
        render_conf | cmp -s - "$CONF" ||
            log "SLURM is running with another slurm.conf than start would write ($CONF); left as it is ('$PROG restart' applies the new one)"
    else
        write_conf || true
    fi
    start_slurmctld
    start_slurmd
    wait_idle >/dev/null || die 5 "node $NODE not idle within ${TIMEOUT}s (logs: $LOG_DIR)"
    # daemons create their logs 0600; let a non-root test read them
    chmod a+r "$LOG_DIR"/*.log "$MUNGE_LOG_DIR"/*.log 2>/dev/null || true
    local started=""
    [[ -z $RECORD ]] || started=$(cut -d' ' -f1 "$RECORD" | xargs)
    [[ -z $RECORD ]] || log "started: ${started:-nothing (SLURM was running), so stop --record leaves it running}"
    echo "$(status_line) (start took $((SECONDS - t0)) s)"
}

# cancel_jobs: cancel every job of the controller (ours: stop stops it next).
cancel_jobs() {
    command -v squeue >/dev/null 2>&1 && ctld_up || return 0
    local jobs i
    jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ' || true)
    [[ -n ${jobs// /} ]] || return 0
    log "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        [[ -z $(squeue -h -t running,completing,pending -o %i 2>/dev/null) ]] && break
        sleep 0.2
    done
}

cmd_stop() {
    if [[ -n $RECORD ]]; then
        local name ours=()
        for name in slurmd slurmctld munged; do
            recorded "$name" >/dev/null && ours+=("$name")
        done
        if ((${#ours[@]} == 0)); then
            echo "slurm-local: nothing to stop: the start that wrote $RECORD started no daemon that still runs"
            return 0
        fi
        need_root
        # Our controller's jobs go with it; our slurmd's steps with it.
        recorded slurmctld >/dev/null && cancel_jobs
        local slurmd ctld munged
        slurmd=$(recorded slurmd || true)
        ctld=$(recorded slurmctld || true)
        munged=$(recorded munged || true)
        if [[ -n $slurmd ]]; then stop_pids slurmd "$slurmd"; rm -f "$SLURMD_PID"; fi
        if [[ -n $ctld ]]; then stop_pids slurmctld "$ctld"; rm -f "$CTLD_PID"; fi
        # also those of a slurmd of the record that died
        ! grep -q '^slurmd ' "$RECORD" || kill_owned_steps
        if [[ -n $munged ]]; then stop_pids munged "$munged"; rm -f "$MUNGE_PID"; fi
        echo "slurm-local: stopped what the start that wrote $RECORD started (${ours[*]})"
        return 0
    fi
    need_root
    pid_alive "$CTLD_PID" slurmctld >/dev/null && cancel_jobs
    stop_daemon slurmd "$SLURMD_PID"
    stop_daemon slurmctld "$CTLD_PID"
    kill_owned_steps
    stop_daemon munged "$MUNGE_PID"
    echo "slurm-local: stopped (the slurmd, slurmctld and munged this script started are not running)"
}

# cmd_around COMMAND...: COMMAND between start --record and stop --record, as
# the caller (start and stop become root themselves); exits with its status.
cmd_around() {
    (($#)) || usage
    local record rc=0 interrupted=0
    record=$(mktemp "${TMPDIR:-/tmp}/ldpsim-slurm-started.XXXXXX")
    # Ctrl-C reaches COMMAND; this script waits for it, then still stops SLURM.
    trap 'interrupted=1' INT TERM
    LDPSIM_SLURM_SKIP_INSTALL=$SKIP_INSTALL bash "$0" start --record "$record" ||
        log "SLURM unavailable (exit $?): the tests marked slurm skip (under CI they fail)"
    if ((!interrupted)); then
        "$@" || rc=$?
    fi
    bash "$0" stop --record "$record" || log "stop --record $record failed (exit $?)"
    rm -f "$record"
    trap - INT TERM
    ((interrupted && rc == 0)) && rc=130
    return "$rc"
}

cmd_status() {
    local line st
    line=$(status_line)
    st=$(node_state)
    echo "$line"
    case $st in
        idle | mixed | allocated | completing) return 0 ;;
        *) return 1 ;;
    esac
}

cmd_logs() {
    local f
    for f in "$LOG_DIR"/slurmctld.log "$LOG_DIR"/slurmd.log "$MUNGE_LOG_DIR"/munged.log "$LOG_DIR"/*.stderr; do
        [[ -s $f ]] || continue
        echo "===== $f (last ${LOG_LINES:-50} lines)"
        tail -n "${LOG_LINES:-50}" "$f"
    done
}

ORIG_ARGS=("$@")
CMD=""
while (($#)); do
    case $1 in
        --no-install | --skip-install) SKIP_INSTALL=1 ;;
        --record)
            (($# >= 2)) || { log "--record needs a file"; usage; }
            RECORD=$(realpath -m -- "$2")
            shift ;;
        -h | --help) usage ;;
        start | stop | status | restart | logs | conf)
            [[ -z $CMD ]] || usage
            CMD=$1 ;;
        around)
            [[ -z $CMD ]] || usage
            CMD=$1
            shift
            [[ ${1:-} != -- ]] || shift
            break ;;
        *) log "unknown argument: $1"; usage ;;
    esac
    shift
done
case $CMD in
    start | stop) ;;
    *) [[ -z $RECORD ]] || { log "--record goes with start or stop"; usage; } ;;
esac

case $CMD in
    start) cmd_start ;;
    stop) cmd_stop ;;
    around) cmd_around "$@" ;;
    status) cmd_status ;;
    restart) cmd_stop; cmd_start ;;
    logs) cmd_logs ;;
    conf) render_conf ;;
    *) usage ;;
esac
