#!/usr/bin/env bash
# Process handling shared by cluster.sh and sites.sh (sourced, not run). The caller sets:
#   PIDS     directory of the pid files (one per process: NAME.pid)
#   LOGS     directory of the logs (NAME.log)
#   STARTED  a file to which "NAME PID" is appended per process started (kept after stop: what ran)

# Start "$@" in a session of its own (pid = process group id) with the working directory $WORKDIR,
# so that stop ends it with every child it spawned (a worker's nanny and its worker process), and
# record the pid.
launch() {
    local name="$1"
    shift
    (cd "$WORKDIR" && exec setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null) &
    echo $! >"$PIDS/$name.pid"
    echo "$name $!" >>"$STARTED"
}

# the process group, or the process itself: right after launch its setsid may not have run yet
alive() { kill -0 -- "-$1" 2>/dev/null || kill -0 "$1" 2>/dev/null; }

# Send TERM to the process groups in the pid files given, wait up to 20 s for them all, KILL what is left.
stop_group() {
    local f pid i left
    local -a pids=()
    for f in "$@"; do
        [[ -e "$f" ]] || continue
        pid="$(cat "$f")"
        alive "$pid" && kill -TERM -- "-$pid" 2>/dev/null && pids+=("$pid")
    done
    for ((i = 0; i < 100; i++)); do
        left=0
        for pid in "${pids[@]}"; do alive "$pid" && left=1; done
        ((left)) || break
        sleep 0.2
    done
    for pid in "${pids[@]}"; do
        if alive "$pid"; then
            log "process group $pid did not stop in 20 s: KILL"
            kill -KILL -- "-$pid" 2>/dev/null || true
            for ((i = 0; i < 25; i++)); do alive "$pid" || break; sleep 0.2; done
        fi
    done
    for f in "$@"; do rm -f "$f"; done
}

# refuse to start over running processes; forget the pid files of processes that died
check_not_running() {
    local f
    for f in "$PIDS"/*.pid; do
        [[ -e "$f" ]] || continue
        if alive "$(cat "$f")"; then
            log "$PIDS has running processes (stop first)"
            return 1
        fi
        rm -f "$f"
    done
}

status_of() {
    local f pid rc=0
    for f in "$PIDS"/*.pid; do
        [[ -e "$f" ]] || { log "nothing started in $PIDS"; return 1; }
        pid="$(cat "$f")"
        if alive "$pid"; then echo "$(basename "$f" .pid) $pid running"; else echo "$(basename "$f" .pid) $pid dead"; rc=1; fi
    done
    return "$rc"
}

export_line() { printf 'export %s=%q\n' "$1" "$2"; }
