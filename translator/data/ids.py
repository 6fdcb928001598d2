"""Each split encoded once into flat arrays of piece ids, read back memory-mapped (the files:
docs/formats.md#the-prepared-directory).

`train` opens them with np.memmap, so start-up reads no token and memory holds only the
pages a batch touches; if they are missing or were made by other tokenizers, it encodes the
splits first.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from itertools import chain
from pathlib import Path

import numpy as np
import sentencepiece as spm

from translator.data.layout import LANGS, SIDES, SPLITS, split_file, tokenizer_file
from translator.data.lines import read_chunks
from translator.data.tokenizer import EOS, PAD, load_tokenizer

CHUNK_LINES = 200_000


@dataclass
class Ids:
    """One split side: sentence i is tokens[offsets[i]:offsets[i + 1]]."""

    tokens: np.ndarray  # memory-mapped
    offsets: np.ndarray  # memory-mapped

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def padded(self, rows: np.ndarray, width: int = 0) -> np.ndarray:
        """(len(rows), longest + 1) array, or `width` columns if that is more: each
        sentence's ids, then EOS, then PAD."""
        start = np.asarray(self.offsets[rows])
        length = np.asarray(self.offsets[rows + 1]) - start
        column = np.arange(max(int(length.max(initial=0)) + 1, width))
        inside = column < length[:, None]
        where = np.minimum(start[:, None] + column, max(len(self.tokens) - 1, 0))
        out = np.where(inside, self.tokens[where] if len(self.tokens) else PAD, PAD)
        out[np.arange(len(rows)), length] = EOS
        return out


@dataclass(frozen=True)
class SubwordSampling:
    """Subword regularisation (Provilkov et al. 2020, BPE-dropout): `count` encodings of
    the train split's `langs`, each merge skipped with probability `alpha`, drawn from a
    generator seeded with `seed`, so the files are the same on every machine."""

    count: int = 0
    alpha: float = 0.1
    langs: tuple[str, ...] = ()
    seed: int = 1

    @classmethod
    def of(cls, data_cfg) -> SubwordSampling:
        """The sampling a DataConfig asks for."""
        if not data_cfg.subword_sampling:
            return cls()
        sides = data_cfg.subword_sides
        langs = tuple(lang for lang, side in SIDES.items() if sides in (side, "both"))
        return cls(data_cfg.subword_sampling, data_cfg.subword_alpha, langs, data_cfg.seed)

    def record(self) -> dict | None:
        return {**asdict(self), "langs": list(self.langs)} if self.count else None

    def files(self) -> list[tuple[str, int]]:
        """(language, k) of every sampled encoding."""
        return [(lang, k) for lang in self.langs for k in range(1, self.count + 1)]


def ids_file(data_dir: Path | str, split: str, lang: str, sample: int = 0) -> Path:
    return Path(data_dir) / f"{split}.{lang}{_sampled(sample)}.ids.bin"


def offsets_file(data_dir: Path | str, split: str, lang: str, sample: int = 0) -> Path:
    return Path(data_dir) / f"{split}.{lang}{_sampled(sample)}.offsets.npy"


def _sampled(sample: int) -> str:
    return f".s{sample}" if sample else ""


def meta_file(data_dir: Path | str) -> Path:
    return Path(data_dir) / "ids.json"


def ids_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def tokenizer_digests(data_dir: Path | str) -> dict[str, str]:
    return {
        lang: hashlib.sha256(tokenizer_file(data_dir, lang).read_bytes()).hexdigest()
        for lang in LANGS
    }


def up_to_date(data_dir: Path | str, sampling: SubwordSampling = SubwordSampling()) -> bool:
    """Whether the ids on disk match the tokenizers now in `data_dir`, and `sampling`."""
    try:
        meta = json.loads(meta_file(data_dir).read_text())
    except (OSError, ValueError):
        return False
    files = [(s, lang, 0) for s in SPLITS for lang in LANGS]
    files += [("train", lang, k) for lang, k in sampling.files()]
    present = all(
        ids_file(data_dir, *f).is_file() and offsets_file(data_dir, *f).is_file() for f in files
    )
    same = meta.get("sampling") == sampling.record()
    return present and same and meta.get("tokenizers") == tokenizer_digests(data_dir)


@dataclass
class Encoded:
    """What encoding the splits counted, per split and language: every piece, and the
    pieces that are `<unk>` or UTF-8 bytes (byte fallback)."""

    tokens: dict[str, dict[str, int]]
    unknown: dict[str, dict[str, int]]
    bytes: dict[str, dict[str, int]]

    def coverage(self, lang: str) -> dict[str, float | int]:
        """All splits together: pieces, <unk> and byte pieces, and their share."""
        pieces = sum(self.tokens[s][lang] for s in SPLITS)
        unknown = sum(self.unknown[s][lang] for s in SPLITS)
        fallback = sum(self.bytes[s][lang] for s in SPLITS)
        share = (unknown + fallback) / pieces if pieces else 0.0
        return {"pieces": pieces, "unknown": unknown, "bytes": fallback, "fallback": share}


def encode_splits(
    data_dir: Path | str, threads: int, sampling: SubwordSampling = SubwordSampling()
) -> Encoded:
    """Encode every split with the tokenizers in `data_dir`, and the train split `sampling`
    times more. ids.json is written last, so an interrupted run is encoded again next time."""
    meta_file(data_dir).unlink(missing_ok=True)
    for old in Path(data_dir).glob("train.*.s*.*"):  # an earlier sampling's encodings
        old.unlink()
    counts = Encoded({s: {} for s in SPLITS}, {s: {} for s in SPLITS}, {s: {} for s in SPLITS})
    dtypes = {}
    sampled: dict[str, int] = {}
    for lang in LANGS:
        tokenizer = load_tokenizer(tokenizer_file(data_dir, lang))
        dtypes[lang] = ids_dtype(tokenizer.get_piece_size())
        kinds = piece_kinds(tokenizer)
        for split in SPLITS:
            encode = partial(tokenizer.encode, num_threads=threads)
            found = _encode_file(encode, kinds, dtypes[lang], data_dir, split, lang)
            counts.tokens[split][lang] = int(found.sum())
            counts.unknown[split][lang] = int(found[UNKNOWN])
            counts.bytes[split][lang] = int(found[BYTE])
        for k in range(1, sampling.count + 1) if lang in sampling.langs else ():
            # one thread: SentencePiece's sampling is reproducible from the seed only then
            spm.set_random_generator_seed(sampling.seed * 1000 + 10 * k + LANGS.index(lang))
            encode = partial(
                tokenizer.encode,
                enable_sampling=True,
                alpha=sampling.alpha,
                nbest_size=-1,
                num_threads=1,
            )
            found = _encode_file(encode, kinds, dtypes[lang], data_dir, "train", lang, k)
            sampled[lang] = sampled.get(lang, 0) + int(found.sum())
    meta = {
        "dtype": {lang: dtypes[lang].name for lang in LANGS},
        "tokenizers": tokenizer_digests(data_dir),
        "tokens": counts.tokens,
        "sampling": sampling.record(),
        "sampled_tokens": sampled,  # every sampled encoding of train together, per language
    }
    meta_file(data_dir).write_text(json.dumps(meta, indent=2) + "\n")
    return counts


PIECE, UNKNOWN, BYTE = 0, 1, 2  # piece_kinds' values


def piece_kinds(tokenizer) -> np.ndarray:
    """One value per id: UNKNOWN for <unk>, BYTE for a byte-fallback piece, else PIECE."""
    size = tokenizer.get_piece_size()
    kinds = np.full(size, PIECE, dtype=np.int8)
    kinds[[i for i in range(size) if tokenizer.is_byte(i)]] = BYTE
    kinds[[i for i in range(size) if tokenizer.is_unknown(i)]] = UNKNOWN
    return kinds


def _encode_file(
    encode: Callable[[list[str]], list[list[int]]],
    kinds: np.ndarray,
    dtype: np.dtype,
    data_dir,
    split: str,
    lang: str,
    sample: int = 0,
) -> np.ndarray:
    """Write the split's ids (`sample` k: its k-th sampled encoding) as `encode` gives them;
    returns how many pieces of each kind (piece_kinds) it has."""
    lengths = [np.zeros(1, dtype=np.int64)]
    found = np.zeros(3, dtype=np.int64)
    target = ids_file(data_dir, split, lang, sample)
    unfinished = target.with_name(target.name + ".partial")
    with unfinished.open("wb") as out:
        for lines in read_chunks(split_file(data_dir, split, lang), CHUNK_LINES):
            ids = encode(lines)
            sizes = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter(chain.from_iterable(ids), dtype=dtype, count=int(sizes.sum()))
            out.write(flat.tobytes())
            found += np.bincount(kinds[flat], minlength=3)
            lengths.append(sizes)
    offsets = np.cumsum(np.concatenate(lengths))
    np.save(offsets_file(data_dir, split, lang, sample), offsets)
    os.replace(unfinished, target)
    return found


def open_ids(data_dir: Path | str, split: str, lang: str, sample: int = 0) -> Ids:
    meta = json.loads(meta_file(data_dir).read_text())
    dtype = np.dtype(meta["dtype"][lang])
    path = ids_file(data_dir, split, lang, sample)
    offsets = np.load(offsets_file(data_dir, split, lang, sample), mmap_mode="r")
    if path.stat().st_size == 0:  # an empty file cannot be mapped
        return Ids(np.zeros(0, dtype=dtype), offsets)
    return Ids(np.memmap(path, dtype=dtype, mode="r"), offsets)
