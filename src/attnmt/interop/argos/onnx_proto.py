"""Protobuf's wire format (the few field kinds attnmt writes: varints, length-delimited, 32-bit
floats), and the ONNX messages a sentence splitter needs, written without the `onnx` or
`protobuf` packages: a model of one graph of nodes over initializer tensors, with its metadata.

    graph = Graph("splitter", nodes=[Node("Gather", ["table", "units"], ["embedded"], {"axis": 0}), ...],
                  inputs=[Input("units", INT64, ["batch", "chars"])], outputs=[...],
                  initializers={"table": np.zeros((5, 3), np.float32)})
    data = model_bytes(graph, opset=13, metadata={"config": "{...}"})

The same field writers append pieces to a sentencepiece model (argos/package.py). Field
numbers are onnx.proto's (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
ValueInfoProto, TypeProto, TensorShapeProto, StringStringEntryProto, OperatorSetIdProto); every
repeated scalar is written unpacked, which every protobuf reader accepts (proto2's default).

Shapes: none (bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

FLOAT, INT64 = 1, 7  # TensorProto.DataType
IR_VERSION = 8  # ONNX 1.10's, read by onnxruntime >= 1.10 (minisbd's floor)
_DTYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64: two's complement, ten bytes
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field_key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def int_field(number: int, value: int) -> bytes:
    return field_key(number, 0) + varint(value)


def bytes_field(number: int, value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return field_key(number, 2) + varint(len(data)) + data


def float_field(number: int, value: float) -> bytes:
    return field_key(number, 5) + struct.pack("<f", value)


@dataclass(frozen=True)
class Node:
    """One operator: `op_type` over `inputs` to `outputs`, with int, float or int-list attributes."""

    op_type: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    attributes: dict = field(default_factory=dict)

    def encode(self, name: str) -> bytes:
        out = b"".join(bytes_field(1, i) for i in self.inputs) + b"".join(bytes_field(2, o) for o in self.outputs)
        out += bytes_field(3, name) + bytes_field(4, self.op_type)
        for key, value in self.attributes.items():
            if isinstance(value, (list, tuple)):
                body = bytes_field(1, key) + b"".join(int_field(8, int(v)) for v in value) + int_field(20, _ATTR_INTS)
            elif isinstance(value, float):
                body = bytes_field(1, key) + float_field(2, value) + int_field(20, _ATTR_FLOAT)
            else:
                body = bytes_field(1, key) + int_field(3, int(value)) + int_field(20, _ATTR_INT)
            out += bytes_field(5, body)
        return out


@dataclass(frozen=True)
class Input:
    """A graph input or output: its name, element type and dimensions (an int, or a name for a
    dimension that varies)."""

    name: str
    elem_type: int
    dims: Sequence[int | str]

    def encode(self) -> bytes:
        dims = b"".join(bytes_field(1, int_field(1, d) if isinstance(d, int) else bytes_field(2, d)) for d in self.dims)
        tensor_type = int_field(1, self.elem_type) + bytes_field(2, dims)
        return bytes_field(1, self.name) + bytes_field(2, bytes_field(1, tensor_type))


def tensor_bytes(name: str, array: np.ndarray) -> bytes:
    """A TensorProto: dims, data type, name and little-endian raw data."""
    array = np.ascontiguousarray(array)
    if array.dtype not in _DTYPES:
        raise ValueError(f"{name}: dtype {array.dtype} is not float32 or int64")
    out = b"".join(int_field(1, d) for d in array.shape) + int_field(2, _DTYPES[array.dtype]) + bytes_field(8, name)
    return out + bytes_field(9, array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())


@dataclass(frozen=True)
class Graph:
    name: str
    nodes: Sequence[Node]
    inputs: Sequence[Input]
    outputs: Sequence[Input]
    initializers: dict

    def encode(self) -> bytes:
        out = b"".join(bytes_field(1, node.encode(f"{node.op_type.lower()}_{i}")) for i, node in enumerate(self.nodes))
        out += bytes_field(2, self.name)
        out += b"".join(bytes_field(5, tensor_bytes(name, array)) for name, array in self.initializers.items())
        out += b"".join(bytes_field(11, value.encode()) for value in self.inputs)
        out += b"".join(bytes_field(12, value.encode()) for value in self.outputs)
        return out


def model_bytes(graph: Graph, *, opset: int, metadata: dict[str, str], producer: str = "attnmt") -> bytes:
    """A serialized ModelProto holding `graph`, the default operator set `opset` and
    `metadata` (the model's custom metadata map)."""
    out = int_field(1, IR_VERSION) + bytes_field(2, producer) + bytes_field(7, graph.encode())
    out += bytes_field(8, bytes_field(1, "") + int_field(2, opset))
    out += b"".join(bytes_field(14, bytes_field(1, key) + bytes_field(2, value)) for key, value in metadata.items())
    return out
