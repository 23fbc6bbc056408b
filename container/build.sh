#!/usr/bin/env bash
# Builds and tests the artifact's images with the pins of container/pins.env as build arguments
# (every engine takes --build-arg; docker and podman 4.3 have no --build-arg-file).
#   bash container/build.sh oci [KEY=VALUE...]   # podman, else docker: image $TAG (mgpu-artifact)
#   bash container/build.sh sif [KEY=VALUE...]   # apptainer: $SIF (artifact.sif) from apptainer.def
#   bash container/build.sh test                 # the OCI image's self-test (container/selftest.sh)
#   bash container/build.sh stage [DIR]          # only the .containerignore selection, into DIR
# KEY=VALUE overrides a pin for this build (e.g. BASE_IMAGE=localhost/debian-bookworm-base).
# ISOLATION=chroot builds with `--isolation chroot` and tests with `buildah run`, for machines
# where podman cannot create containers (rootless CI, nested sandboxes). BUILD_OPTS: more options
# for the engine's build, e.g. "--volume /opt/wheels:/wheels:ro" with WHEELS=/wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
shift || true
TAG=${TAG:-mgpu-artifact}
SIF=${SIF:-artifact.sif}
ISOLATION=${ISOLATION:-}
read -r -a extra <<<"${BUILD_OPTS:-}"

die() { echo "error: $*" >&2; exit 2; }
engine() {
    if [[ -n "${CONTAINER_ENGINE:-}" ]]; then echo "$CONTAINER_ENGINE"; return; fi
    command -v podman || command -v docker || die "neither podman nor docker is installed"
}

declare -A pins=()
order=()
while IFS= read -r line; do
    [[ "$line" =~ ^([A-Z_]+)=(.*)$ ]] || continue
    pins[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
    order+=("${BASH_REMATCH[1]}")
done < container/pins.env
for kv in "$@"; do
    [[ "$kind" == stage ]] && break  # its argument is a folder
    [[ "$kv" =~ ^([A-Z_]+)=(.*)$ && -v "pins[${BASH_REMATCH[1]}]" ]] ||
        die "'$kv' is not KEY=VALUE for a pin of container/pins.env (${order[*]})"
    pins[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done
sha=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ "$sha" != unknown && -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    sha="$sha-dirty"
fi
args=()
for key in "${order[@]}"; do args+=(--build-arg "$key=${pins[$key]}"); done
args+=(--build-arg "GIT_SHA=$sha")

# The .containerignore selection of the repository, staged for apptainer's %files (Apptainer has
# no ignore file): plain patterns are anchored at the root, **/ ones match at any depth.
stage() {
    local dest=$1 pat excludes=()
    while IFS= read -r pat; do
        [[ -z "$pat" || "$pat" == \#* ]] && continue
        if [[ "$pat" == \*\*/* ]]; then
            excludes+=(--no-anchored "--exclude=${pat#\*\*/}")
        else
            excludes+=(--anchored "--exclude=./$pat")
        fi
    done < .containerignore
    rm -rf "$dest"
    mkdir -p "$dest"
    tar -c "${excludes[@]}" . | tar -x -C "$dest"
}

case "$kind" in
    oci)
        eng=$(engine)
        iso=()
        [[ -n "$ISOLATION" ]] && iso=(--isolation "$ISOLATION")
        echo "[container] $eng build ${args[*]} ${iso[*]} ${extra[*]} -t $TAG -f Containerfile ."
        start=$(date +%s)
        "$eng" build "${args[@]}" "${iso[@]}" "${extra[@]}" -t "$TAG" -f Containerfile .
        size=$("$eng" image inspect --format '{{.Size}}' "$TAG")
        echo "[container] built $TAG in $(($(date +%s) - start)) s, $((size / 1000000)) MB"
        ;;
    sif)
        command -v apptainer >/dev/null || die "apptainer is not installed"
        stage build/sif-context
        args+=(--build-arg "CONTEXT=$PWD/build/sif-context")
        echo "[container] apptainer build ${args[*]} ${extra[*]} $SIF apptainer.def"
        apptainer build "${args[@]}" "${extra[@]}" "$SIF" apptainer.def
        ;;
    stage)
        stage "${1:-build/sif-context}"
        ;;
    test)
        if [[ "$ISOLATION" == chroot ]]; then
            ctr=$(buildah from "$TAG")
            trap 'buildah rm "$ctr" >/dev/null' EXIT
            buildah run --isolation chroot "$ctr" -- bash /artifact/container/selftest.sh
        else
            "$(engine)" run --rm --shm-size=1g --entrypoint bash "$TAG" \
                /artifact/container/selftest.sh
        fi
        ;;
    *)
        die "usage: container/build.sh oci|sif|test|stage [KEY=VALUE...]"
        ;;
esac
