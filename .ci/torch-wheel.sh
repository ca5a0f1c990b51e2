# Sourced by the .ci scripts whose venvs need PyTorch. torch must be its CPU build, which comes
# from a local wheel directory (PyPI's torch pulls GBs of CUDA); the requirements pin it.
#   torch_wheel NAME DIR   print the torch ${torch_version} wheel for Python 3.11 in DIR, or say
#                          (as the script NAME) how to get one and fail
torch_version="2.13.0+cpu"

torch_wheel() {
    local name="$1" wheels="$2"
    local found
    shopt -s nullglob
    found=("${wheels}"/torch-"${torch_version}"-cp311-*.whl)
    shopt -u nullglob
    if [[ ${#found[@]} -eq 0 ]]; then
        cat >&2 <<MSG
${name}: no torch ${torch_version} wheel for Python 3.11 in ${wheels}.
  Its venv needs PyTorch's CPU build (PyPI's torch would pull GBs of CUDA). Put
  torch-${torch_version}-cp311-cp311-manylinux_2_28_x86_64.whl into ${wheels}, e.g.
    pip download --no-deps --python-version 3.11 --only-binary=:all: -d ${wheels} \\
        torch==${torch_version} --index-url https://download.pytorch.org/whl/cpu
  or pass a directory that has it: .ci/${name} DIR
MSG
        return 1
    fi
    echo "${found[0]}"
}
