"""ckpt_mutate.py IN OUT WHAT — writes a copy of the ampx checkpoint IN with one hostile
change WHAT, for tests/hostile.sh. The header is re-serialised; the data is kept unless the
change is to the data."""
import json
import struct
import sys

src, dst, what = sys.argv[1], sys.argv[2], sys.argv[3]
with open(src, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = bytearray(f.read())
meta = header["__metadata__"]
sc = header["ampx.scalars"]["data_offsets"][0]  # the scalars block (ampx_scalars)


def put(fmt, off, value):
    struct.pack_into(fmt, data, sc + off, value)


def elem(name, i, value):
    b = header[name]["data_offsets"][0]
    struct.pack_into("<f", data, b + 4 * i, value)


if what == "step_negative":
    meta["step"] = "-5"
elif what == "step_text":
    meta["step"] = "12abc"
elif what == "step_huge":
    meta["step"] = "99999999999999999999"
elif what == "scale_nan":
    put("<f", 0, float("nan"))
elif what == "scale_zero":
    put("<f", 0, 0.0)
elif what == "scale_negative":
    put("<f", 0, -4.0)
elif what == "skipped_negative":
    put("<i", 20, -1)
elif what == "growth_negative":
    put("<i", 8, -3)
elif what == "stop_reason":
    put("<i", 32, 1)
elif what == "adam_v_negative":
    elem("ampx.adam_v.fc1.weight", 3, -1.0)
elif what == "weight_nan":
    elem("fc2.bias", 0, float("nan"))
elif what == "weight_inf":
    elem("fc1.weight", 7, float("-inf"))
elif what == "offsets_fraction":
    b, e = header["fc1.bias"]["data_offsets"]
    header["fc1.bias"]["data_offsets"] = [b + 0.5, e + 0.5]
elif what == "offsets_overlap":
    b, e = header["fc1.bias"]["data_offsets"]
    header["fc1.bias"]["data_offsets"] = [b - 4, e - 4]
elif what == "offsets_gap":
    data += b"\0" * 8
elif what == "offsets_huge":
    header["fc1.bias"]["data_offsets"] = [2**52, 2**52 + 512]
elif what == "extra_tensor":
    header["stowaway"] = {"dtype": "F32", "shape": [2], "data_offsets": [len(data), len(data) + 8]}
    data += b"\0" * 8
elif what == "meta_number":
    meta["seed"] = 1
elif what == "meta_disagrees":
    meta["applied_steps"] = str(int(meta["applied_steps"]) + 1)
elif what == "dtype_unknown":
    header["fc1.bias"]["dtype"] = "F33"
elif what == "shape_negative":
    header["fc1.bias"]["shape"] = [-128]
else:
    sys.exit("unknown mutation " + what)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + bytes(data))
