#!/bin/sh
# A stand-in trainer that speaks gpuroom's local-executor protocol
# (src/sources/local.rs): it resumes from $GPUROOM_RESUME_STEP, appends
# `progress N` as it goes, writes a checkpoint on SIGUSR1 and reports it with
# `checkpoint N BYTES`, stops cleanly on SIGTERM, and exits 0 after $STEPS.
# $STEP_SECS sets the pace; $ENV_DUMP, if set, receives its environment.
steps=${STEPS:-100}
pace=${STEP_SECS:-0.2}
step=${GPUROOM_RESUME_STEP:-0}
[ -n "$ENV_DUMP" ] && env > "$ENV_DUMP"
save=0
trap 'save=1' USR1
trap 'exit 0' TERM
while [ "$step" -lt "$steps" ]; do
    sleep "$pace"
    step=$((step + 1))
    echo "progress $step" >> "$GPUROOM_PROGRESS_FILE"
    if [ "$save" = 1 ]; then
        save=0
        file="$GPUROOM_CHECKPOINT_DIR/step-$step"
        echo "state at $step ($(cat "$GPUROOM_CHECKPOINT_KIND_FILE" 2>/dev/null || echo full))" > "$file"
        echo "checkpoint $step $(wc -c < "$file" | tr -d ' ')" >> "$GPUROOM_PROGRESS_FILE"
    fi
done
exit 0
