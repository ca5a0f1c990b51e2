"""What the trainer's ``--log-to`` wrote, read back independently of the writers: TensorBoard
event files (TFRecord framing, each record an ``Event`` protobuf, with TensorBoard's purge of a
restarted run) and a wandb run's ``.wandb`` file (LevelDB log framing, each record wandb's own
``Record`` protobuf)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

Scalars = dict[str, dict[int, float]]


def tensorboard_scalars(logdir: Path) -> Scalars:
    """``tag -> step -> value`` of every event file in ``logdir``, in the order of their names
    (as TensorBoard reads them); an event file that starts with a purge step (a resumed run)
    drops the earlier events at or after it, as TensorBoard does."""
    from tensorboardX.proto.event_pb2 import Event  # type: ignore[import-untyped]

    scalars: Scalars = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            event = Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            if event.file_version and event.step:
                for values in scalars.values():
                    for step in [s for s in values if s >= event.step]:
                        del values[step]
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars


def _leveldb_records(data: bytes) -> list[bytes]:
    """The records of a LevelDB-log-framed file after wandb's 7-byte header (32 KiB blocks,
    7-byte record headers: CRC, length, type full/first/middle/last)."""
    block, records, offset, parts = 32768, [], 7, b""
    while offset + 7 <= len(data):
        if block - offset % block < 7:  # a block's trailer: too short for a header
            offset += block - offset % block
            continue
        length, kind = struct.unpack_from("<HB", data, offset + 4)
        payload = data[offset + 7 : offset + 7 + length]
        offset += 7 + length
        if kind == 0:
            continue
        parts = payload if kind in (1, 2) else parts + payload
        if kind in (1, 4):
            records.append(parts)
    return records


def wandb_history(run_file: Path) -> Scalars:
    """``key -> step -> value`` of the history rows in a ``run-*.wandb`` file."""
    from wandb.proto.wandb_internal_pb2 import Record  # type: ignore[attr-defined]  # star-import by protobuf version

    assert run_file.read_bytes()[:4] == b":W&B", run_file
    history: Scalars = {}
    for raw in _leveldb_records(run_file.read_bytes()):
        record = Record.FromString(raw)
        if record.WhichOneof("record_type") != "history":
            continue
        items = {
            item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in record.history.item
        }
        step = int(items.get("_step", record.history.step.num))
        for key, value in items.items():
            if not key.startswith("_"):
                history.setdefault(key, {})[step] = float(value)
    return history


def wandb_run(run_file: Path) -> tuple[str, str, dict[str, object]]:
    """The project, the name and the config (``key -> value``) of a ``.wandb``'s run."""
    from wandb.proto.wandb_internal_pb2 import Record  # type: ignore[attr-defined]  # star-import by protobuf version

    for raw in _leveldb_records(run_file.read_bytes()):
        record = Record.FromString(raw)
        if record.WhichOneof("record_type") == "run":
            config = {
                item.key: json.loads(item.value_json)
                for item in record.run.config.update
                if not item.key.startswith("_")
            }
            return record.run.project, record.run.display_name, config
    raise AssertionError(f"{run_file}: no run record")
