#!/usr/bin/env bash
# An example CI pipeline for any CI system (GitLab CI, Jenkins, GitHub Actions, Buildkite,
# a cron job): plain shell steps that plan a tier, bring it up in the container lab,
# converge it twice (the second run must change nothing), validate it, and keep every
# ansible-runner artifact. Each playbook runs through ansible-runner (make runner), so
# each step leaves artifacts/<ident>/{status,rc,stdout,job_events/} in
# build/runner/<tier>/; the last step packs them into $ARTIFACTS.
#
#   TIER=tier2 bash tools/ci/pipeline.sh          # or: make ci-pipeline TIER=tier2
#
# Settings (environment):
#   TIER          reference tier, inventories/$TIER (default tier2)
#   ARTIFACTS     where the archive and the summaries go (default build/ci/$TIER)
#   STEPS         which steps to run, in order (default "lint plan lab converge idempotence validate")
#   KEEP_LAB=1    leave the lab running at the end (default: make lab-down)
#
# Needs: Debian 12 as root with podman for the lab steps (make deps / make lab-images
# install it); the plan step needs nothing but Python. In a CI system map each step to a
# job or stage if you like: they only share the repository checkout and build/.
set -euo pipefail
cd "$(dirname "$0")/../.."

TIER=${TIER:-tier2}
ARTIFACTS=${ARTIFACTS:-build/ci/$TIER}
STEPS=${STEPS:-lint plan lab converge idempotence validate}
RUNNER_DIR=build/runner/$TIER
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$ARTIFACTS"

log() { printf '\n=== %s: %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# make with the CI targets (mk/ci.mk, which the root Makefile includes).
mk() {
  make "$@"
}

# One playbook through ansible-runner; its summary (status, rc, recap) next to the archive.
runner() { # runner <playbook> <ident> [LAB=1]
  local playbook=$1 ident=$2 rc=0
  shift 2
  mk runner TIER="$TIER" PLAYBOOK="$playbook" RUNNER_IDENT="$ident" "$@" || rc=$?
  .venv/bin/python tools/ci/runner_dir.py stats "$RUNNER_DIR/artifacts/$ident" >"$ARTIFACTS/$ident.json" || true
  return "$rc"
}

# Always: pack the artifacts and the plan, then take the lab down (unless KEEP_LAB=1).
finish() {
  local rc=$?
  log "artifacts -> $ARTIFACTS"
  if [ -d "$RUNNER_DIR/artifacts" ]; then
    # the runs got a filtered environment (make runner); scrub the recorded ones again (older runs,
    # other callers) and pack env/ as the template wrote it, never a passwords or ssh_key file
    .venv/bin/python tools/ci/runner_dir.py scrub "$RUNNER_DIR" || true
    tar -czf "$ARTIFACTS/runner-artifacts-$STAMP.tar.gz" -C "$RUNNER_DIR" artifacts inventory env/envvars env/settings
  fi
  if [ -d build/plan ]; then tar -czf "$ARTIFACTS/plan-$STAMP.tar.gz" -C build plan; fi
  if [ -d build/validate ]; then tar -czf "$ARTIFACTS/validate-$STAMP.tar.gz" -C build validate; fi
  if [[ " $STEPS " == *" lab "* && "${KEEP_LAB:-0}" != 1 ]]; then
    log "lab down"
    mk lab-down TIER="$TIER" || true
  fi
  exit "$rc"
}
trap finish EXIT

mk setup
for step in $STEPS; do
  case $step in
    lint)
      log "lint: ruff, ansible-lint (production profile)"
      mk lint
      ;;
    plan)
      log "plan $TIER (no hosts): build/plan/<name>/"
      runner plan "plan-$STAMP"
      ;;
    lab)
      log "lab: containers for every host of inventories/$TIER"
      mk lab-up TIER="$TIER"
      ;;
    converge)
      log "converge site.yml on the lab"
      runner site "site-$STAMP" LAB=1
      ;;
    idempotence)
      log "converge again: nothing may change"
      runner site "site-again-$STAMP" LAB=1
      .venv/bin/python tools/ci/runner_dir.py stats --expect-unchanged "$RUNNER_DIR/artifacts/site-again-$STAMP" >/dev/null
      ;;
    validate)
      log "validate: acceptance checks against the tier's floors"
      runner validate "validate-$STAMP" LAB=1
      ;;
    *)
      echo "unknown step: $step" >&2
      exit 2
      ;;
  esac
done
log "pipeline passed: $STEPS"
