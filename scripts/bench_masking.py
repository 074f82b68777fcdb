"""Benchmark of phone number masking: prints figures, asserts nothing.

- Throughput of ``mask_numbers`` (characters per second) over the corpus texts, over ordinary
  French prose, and over a synthetic long answer that mixes prose, numbers to mask and
  look-alikes to keep.
- Latency that ``StreamMasker`` adds to each ``feed`` when a model streams chunks of 1 to 8
  characters: median and 99th percentile, in microseconds; the same for the whole stream
  post-processing of a turn (``StreamSanitizer`` then ``StreamMasker``).
- Worst adversarial inputs, one shot and streamed: 10 KB of digits and separators, 10 KB of
  nested markup, a million zeros. Time should grow linearly with the size: each is also run
  at a tenth of its size, and the ratio printed.

Run from the repository root: ``.venv/bin/python scripts/bench_masking.py``.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from safety.markup import StreamSanitizer, sanitize  # noqa: E402
from safety.masking import StreamMasker, mask_numbers  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "masking"

PROSE = (
    "Le bruit que vous décrivez, répété chaque nuit depuis plusieurs semaines, peut constituer "
    "un trouble anormal de voisinage. Notez dans votre journal la date, l'heure et la durée de "
    "chaque nuisance, puis adressez un courrier à votre voisin en restant courtois. Si rien ne "
    "change, le syndic ou le bailleur peuvent intervenir, et un conciliateur de justice peut "
    "vous aider gratuitement à trouver un accord amiable avant toute procédure.\n"
)
MIXED = (
    "Le 14/07/2024, vous avez relevé 62 dB à 23h40. Le syndic est joignable au 01 42 60 33 21 "
    "du lundi au vendredi, de 9h à 17h ; le gardien au 06 12 34 56 78. En cas de danger, "
    "appelez le 17 ou le 112. Pour une question de droit, composez le 3939. "
    "Référence du dossier : 2024-118734, SIREN 443 061 841, montant réclamé : 1 500 €.\n"
)


def _throughput(text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        mask_numbers(text)
        best = min(best, time.perf_counter() - start)
    return len(text) / best


def _feed_latencies(texts: list[str], whole: bool = False, seed: int = 7) -> list[float]:
    rng = random.Random(seed)  # noqa: S311 - chunk sizes, not secrets
    latencies: list[float] = []
    for text in texts:
        masker, sanitizer = StreamMasker(), StreamSanitizer()
        position = 0
        while position < len(text):
            size = rng.randint(1, 8)
            chunk = text[position : position + size]
            position += size
            start = time.perf_counter_ns()
            masker.feed(sanitizer.feed(chunk) if whole else chunk)
            latencies.append((time.perf_counter_ns() - start) / 1000)
        masker.close()
    return latencies


def _pipeline(text: str) -> str:
    return mask_numbers(sanitize(text).text).text


def _streamed(text: str, size: int = 64) -> str:
    masker, sanitizer = StreamMasker(), StreamSanitizer()
    out = [masker.feed(sanitizer.feed(text[i : i + size])) for i in range(0, len(text), size)]
    return "".join(out) + masker.feed(sanitizer.close()) + masker.close()


def _seconds(function: object, text: str) -> float:
    start = time.perf_counter()
    function(text)  # type: ignore[operator]
    return time.perf_counter() - start


ADVERSARIAL = {
    "10 KB digits and separators": lambda n: ("06 12.34-56/7 " * (n // 14 + 1))[:n],
    "10 KB nested markup": lambda n: ("<b>[**`(" * (n // 16 + 1) + ")`**]</b>" * (n // 16 + 1))[:n],
    "a million zeros": lambda n: "0" * n,
}
SIZES = {"10 KB digits and separators": 10_000, "10 KB nested markup": 10_000,
         "a million zeros": 1_000_000}  # fmt: skip


def main() -> None:
    corpus = [
        json.loads(line)["text"]
        for path in sorted(CORPUS.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    mask_numbers(" ".join(corpus))  # warm the caches of the phone number library

    print("mask_numbers throughput (best of 5)")
    for name, text in [
        ("corpus texts, joined", "\n".join(corpus) * 5),
        ("ordinary French prose", PROSE * 2_000),
        ("synthetic long answer", (PROSE + MIXED) * 500),
    ]:
        rate = _throughput(text, 5)
        print(
            f"  {name:<24} {len(text):>9,} chars  {rate:>12,.0f} chars/s  ({rate / 1e6:.2f} MB/s)"
        )

    print("StreamMasker.feed latency, chunks of 1-8 characters")
    for name, texts in [("corpus texts", corpus * 5), ("synthetic answers", [PROSE + MIXED] * 200)]:
        latencies = sorted(_feed_latencies(texts))
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(
            f"  {name:<24} {len(latencies):>9,} feeds  median {statistics.median(latencies):.1f} µs"
            f"  p99 {p99:.1f} µs  max {latencies[-1]:.1f} µs"
        )
    latencies = sorted(_feed_latencies(corpus * 5, whole=True))
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"  {'sanitize + mask, corpus':<24} {len(latencies):>9,} feeds  median "
        f"{statistics.median(latencies):.1f} µs  p99 {p99:.1f} µs  max {latencies[-1]:.1f} µs"
    )

    print("Worst adversarial inputs (sanitize + mask), one shot and streamed in 64-char chunks")
    for name, make in ADVERSARIAL.items():
        size = SIZES[name]
        for label, function in (("one shot", _pipeline), ("streamed", _streamed)):
            small, large = make(size // 10), make(size)
            t_small, t_large = _seconds(function, small), _seconds(function, large)
            print(
                f"  {name:<28} {label:<9} {t_large * 1000:9.1f} ms"
                f"  (x{t_large / max(t_small, 1e-9):.1f} for x10 the size)"
            )


if __name__ == "__main__":
    main()
