#!/usr/bin/env python3
"""The duplicate search's figures: what a hash costs a build worker, how the search scales, and the
measurements behind the default threshold.

    python scripts/bench_duplicates.py [--count 1000000] [--threshold 8] [--planted]

1. The perceptual hash of one 512x512x3 picture (scikit-image's astronaut), next to what a build
   worker spends on the same picture anyway: a JPEG decode and a q95 encode (simplejpeg), same run.
2. ``find_groups`` over ``--count`` records: random 64-bit hashes (the worst case for band
   lookups is not random; real hashes crowd, see docs/duplicates.md), with planted twins: 10,000
   near pairs at 1 to ``--threshold`` bits, 1,000 exact copies, 1,000 pairs just beyond the threshold
   (which must not be found). Seconds and the peak RSS, before and after the search.
3. ``--planted``: the Hamming distances the planted changes move a picture by, and the closest two
   distinct pictures, over the test set's pictures (scikit-image photos and 200 synthetic ones).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import timeit
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shardkit.duplicates.groups import find_groups  # noqa: E402
from shardkit.duplicates.phash import phash  # noqa: E402


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hash_cost() -> None:
    import simplejpeg
    import skimage.data

    picture = np.ascontiguousarray(skimage.data.astronaut())
    encoded = simplejpeg.encode_jpeg(picture, 95)

    def best_ms(work: object) -> float:
        return min(timeit.repeat(work, number=40, repeat=7)) / 40 * 1e3  # type: ignore[arg-type]

    print("512x512x3, best of 7 x 40, ms per picture:")
    print(f"  perceptual hash       {best_ms(lambda: phash(picture)):6.2f}")
    print(f"  JPEG decode           {best_ms(lambda: simplejpeg.decode_jpeg(encoded)):6.2f}")
    print(f"  JPEG encode q95       {best_ms(lambda: simplejpeg.encode_jpeg(picture, 95)):6.2f}")


def flipped(rng: np.random.Generator, hashes: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Each hash with that many distinct random bits flipped."""
    masks = np.zeros(len(hashes), dtype=np.uint64)
    for row, count in enumerate(bits.tolist()):
        masks[row] = sum(1 << int(b) for b in rng.choice(64, size=count, replace=False))
    return hashes ^ masks


def search(count: int, threshold: int) -> None:
    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 2**64 - 1, count, dtype=np.uint64, endpoint=True)
    near, exact, far = 10_000, 1_000, 1_000
    pick = rng.permutation(count)[: 2 * (near + exact + far)].reshape(2, -1)
    sources, copies = pick
    hashes[copies[:near]] = flipped(rng, hashes[sources[:near]], rng.integers(1, threshold + 1, near))
    hashes[copies[near : near + exact]] = hashes[sources[near : near + exact]]
    beyond = np.full(far, min(threshold + 1, 64))
    hashes[copies[near + exact :]] = flipped(rng, hashes[sources[near + exact :]], beyond)
    digests = np.arange(count, dtype=">i8").view("S8")  # every record its own bytes: twins by hash only
    splits = ["train", "val", "test"]
    split_of = [splits[i] for i in rng.choice(3, size=count, p=[0.8, 0.1, 0.1]).tolist()]
    source_ids = [f"img-{i:07d}" for i in range(count)]
    identities = range(count)
    before = peak_mb()
    started = time.perf_counter()
    groups = find_groups(hashes, digests, split_of, source_ids, identities, threshold)
    seconds = time.perf_counter() - started
    group_of = {m.index: number for number, g in enumerate(groups) for m in g.members}
    pairs = list(zip(sources.tolist(), copies.tolist(), strict=True))
    together = [s in group_of and group_of[s] == group_of.get(c) for s, c in pairs]
    missed = (near + exact) - sum(together[: near + exact])
    false_far = sum(together[near + exact :])
    print(f"{count:,} records, threshold {threshold}: {seconds:.1f} s, {len(groups):,} groups")
    print(f"  planted twins missed: {missed} of {near + exact:,}; pairs {threshold + 1} bits apart found: {false_far} of {far:,}")
    print(f"  peak RSS {before:,.0f} MB before the search (the records' arrays and lists), {peak_mb():,.0f} MB after")


def planted_distances() -> None:
    sys.path.insert(0, str(ROOT))
    from shardkit.duplicates.phash import distance
    from tests.duplicates.planted import CHANGES, bases

    pictures = bases(200)
    hashes = {name: phash(p) for name, p in pictures.items()}
    print(f"{len(pictures)} distinct pictures; distance of each change from its picture (count of pictures):")
    for what, change in CHANGES.items():
        moved = Counter(distance(hashes[n], phash(change(p))) for n, p in pictures.items())
        print(f"  {what:11} " + "  ".join(f"{d}: {moved[d]}" for d in sorted(moved)))
    names = list(hashes)
    apart = sorted(distance(hashes[a], hashes[b]) for i, a in enumerate(names) for b in names[i + 1 :])
    print(f"  distinct pictures: closest {apart[0]}, " + ", ".join(f"<= {t}: {sum(d <= t for d in apart)}" for t in (12, 16, 20)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--threshold", type=int, default=8)
    parser.add_argument("--planted", action="store_true", help="also measure the planted changes' distances")
    args = parser.parse_args()
    hash_cost()
    search(args.count, args.threshold)
    if args.planted:
        planted_distances()


if __name__ == "__main__":
    main()
