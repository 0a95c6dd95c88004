"""Partition health (degenerate partitions) and halo completeness."""

from __future__ import annotations

from typing import Any

from distcheck.runtime.run_result import RankRecord
from distcheck.validate.health import halo_completeness, partition_health


def record(
    rank: int,
    owned: int = 10,
    halo: int = 4,
    remote: int = 6,
    cutoffs: list[float] | None = None,
    halo_width: float = 5.5,
) -> RankRecord:
    return RankRecord(
        rank=rank,
        device="cpu",
        owned=owned,
        halo=halo,
        remote=remote,
        per_system=[{"system": 0, "owned": owned, "halo": halo, "remote": remote}],
        handler_counts={},
        timings={},
        requested_cutoffs=list(cutoffs or []),
        halo_width=halo_width,
    )


def test_healthy_partition() -> None:
    out = partition_health([record(0), record(1, owned=10, halo=3, remote=7)])
    assert out.degenerate == []
    assert out.to_dict()["per_rank"] == {
        "0": {"owned": 10, "halo": 4, "remote": 6},
        "1": {"owned": 10, "halo": 3, "remote": 7},
    }


def test_no_owned_atoms() -> None:
    out = partition_health([record(0), record(1, owned=0, halo=5, remote=16)])
    msgs = out.degenerate
    assert len(msgs) == 1 and msgs[0].startswith("rank 1 owns no atoms") and "fewer ranks" in msgs[0]


def test_no_halo_atoms() -> None:
    out = partition_health([record(0, halo=0), record(1)])
    assert len(out.degenerate) == 1
    assert out.degenerate[0].startswith("rank 0 has no halo atoms")


def test_no_remote_atoms() -> None:
    out = partition_health([record(0), record(1, remote=0)])
    assert out.degenerate == [
        "rank 1 has no remote atoms: every atom is within its halo, so the run never crosses a true domain "
        "boundary; use a larger sample (longer along one axis) or fewer ranks"
    ]


def test_every_zero_count_is_reported() -> None:
    out = partition_health([record(0, halo=0, remote=0), record(1)])
    assert len(out.degenerate) == 2
    assert all(m.startswith("rank 0") for m in out.degenerate)


def test_world_size_one_is_degenerate() -> None:
    out = partition_health([record(0, owned=20, halo=0, remote=0)])
    assert len(out.degenerate) == 1
    assert "world_size is 1" in out.degenerate[0] and "proves nothing" in out.degenerate[0]
    assert out.to_dict()["per_rank"] == {"0": {"owned": 20, "halo": 0, "remote": 0}}


def halo(records: list[RankRecord], policy: str, mode: str, cutoff: float | None, depth: int | None) -> dict[str, Any]:
    out = halo_completeness(records, policy, mode, cutoff, depth).to_dict()
    assert set(out) == {"matches", "halo_width", "required_width", "interpretation"}
    return out


def test_halo_correction_matches() -> None:
    recs = [record(0, cutoffs=[5.0, 5.0], halo_width=5.5), record(1, cutoffs=[5.0], halo_width=5.5)]
    out = halo(recs, "halo", "halo_correction", 5.0, 3)
    assert out["matches"] is True and out["halo_width"] == 5.5 and out["required_width"] == 5.0
    assert "complete" in out["interpretation"]


def test_halo_correction_too_shallow_uses_requested_cutoff() -> None:
    # The wrapper declares 4 Å but asks the batch for a 6 Å neighbour list: the request decides.
    recs = [record(0, cutoffs=[6.0], halo_width=4.5), record(1, cutoffs=[6.0], halo_width=4.5)]
    out = halo(recs, "halo", "halo_correction", 4.0, 2)
    assert out["matches"] is False and out["required_width"] == 6.0
    assert "`distribution.policy.halo_width` >= 6 Å" in out["interpretation"]


def test_local_matches() -> None:
    recs = [record(r, cutoffs=[5.0], halo_width=15.5) for r in range(2)]
    out = halo(recs, "halo", "local", 5.0, 3)
    assert out["matches"] is True and out["required_width"] == 15.0


def test_local_too_shallow() -> None:
    recs = [record(r, cutoffs=[5.0], halo_width=5.5) for r in range(2)]
    out = halo(recs, "halo", "local", 5.0, 3)
    assert out["matches"] is False and out["required_width"] == 15.0
    text = out["interpretation"]
    assert "`distribution.policy.halo_width` >= 15 Å" in text and "halo_correction" in text
    assert "3 layer(s) × 5 Å" in text


def test_local_without_requests_uses_declared_cutoff_and_depth() -> None:
    recs = [record(r, cutoffs=[], halo_width=8.5) for r in range(2)]
    out = halo(recs, "halo", "local", 4.0, 2)
    assert out["matches"] is True and out["required_width"] == 8.0
    shallow = halo([record(r, halo_width=4.5) for r in range(2)], "halo", "local", 4.0, 2)
    assert shallow["matches"] is False
    assert "halo_correction" not in shallow["interpretation"]  # halo-unaware backbone: don't suggest it


def test_local_without_num_interactions_assumes_one_layer() -> None:
    out = halo([record(r, cutoffs=[5.0], halo_width=5.5) for r in range(2)], "halo", "local", 5.0, None)
    assert out["matches"] is True and out["required_width"] == 5.0
    assert "num_interactions" in out["interpretation"]


def test_replicated_always_matches() -> None:
    recs = [record(r, halo_width=float("inf"), cutoffs=[]) for r in range(2)]
    out = halo(recs, "replicated", "halo_correction", 5.0, 3)
    assert out["matches"] is True and out["halo_width"] is None and out["required_width"] is None


def test_halo_unaware_backbone_under_halo_correction() -> None:
    recs = [record(r, cutoffs=[], halo_width=5.5) for r in range(2)]
    out = halo(recs, "halo", "halo_correction", 5.0, 3)
    assert out["matches"] is False
    text = out["interpretation"]
    assert "batch.neighbor_list" in text and "halo-unaware" in text and "double counts" in text
    assert "'local'" in text and ">= 15 Å" in text
    assert out["required_width"] == 15.0


def test_unknown_cutoff() -> None:
    out = halo([record(r, cutoffs=[]) for r in range(2)], "halo", "local", None, None)
    assert out["matches"] is True and out["required_width"] is None
    assert "cutoff" in out["interpretation"]
