"""Support: the learned support judge (:mod:`aisac_core.roles.support_model`) on SciFact claims with their cited
abstracts (Wadden et al., EMNLP 2020; the format of ``../shared/data/claims/scifact``).

``python -m bench --only support`` evaluates the held-out claims of the shared train file (the ``test`` part of the
split by claim of :func:`split`, the one ``bench/train_support.py`` used); ``--claims FILE --corpus FILE`` evaluates
every claim of any file in the SciFact format (``id``, ``claim``, ``evidence``, ``cited_doc_ids``) against its
corpus (``doc_id``, ``abstract``: sentences). Each claim is judged against each of its **cited** abstracts (the
gold abstracts: no retrieval step), as aisac's evaluator judges each cited passage. Figures:

- **rationale selection** P / R / F1: predicted rationale sentences (calibrated rationale probability >= the
  model's threshold) against the gold rationale sentences, over all cited abstracts;
- **sentence-level** P / R / F1 (selection + label) and **abstract-level** P / R / F1 (label + rationale: the
  gold rationale within the first three predicted sentences), scored as in allenai/scifact ``doc/evaluation.md``
  (the shared README quotes it), an abstract being predicted when its verdict is ``supports`` or ``contradicts``;
- **label accuracy** with the gold abstracts (3 classes: supports / contradicts / does not address);
- **"supported" precision** (of the abstracts judged ``supports``, the share whose gold label is SUPPORT) and
  recall, the same for ``contradicts``;
- **ECE** (10 equal-width bins, Guo et al. 2017) of the calibrated P(support) per abstract and a reliability table,
  beside the ECE that sampling alone gives a perfectly calibrated probability on as many abstracts
  (:func:`ece_by_chance`: median and 95th percentile), so that a figure can be read against its noise;
- **no-evidence abstention**: of the claims without evidence, the share with no ``supports`` citation (and the
  share with neither ``supports`` nor ``contradicts``);
- **cost**: ms per citation of :func:`aisac_core.roles.support_model.judge_passage` (embedding included, warm
  embedder, one abstract per call) and the largest event-loop stall while judgements run in worker threads.

On the held-out claims (no ``--claims``), the table of the fixed split is followed by the nested cross-validation
over all shared claims (``python bench/train_support.py --nested``, :data:`NESTED_FILE`) when it measured the
shipped model: "supported" precision and ECE of P(support) of both with 95 % bootstrap intervals over claims
(:func:`bootstrap`) and the ECE a perfectly calibrated probability would show.

The published figures beside them are VeriSci's on the SciFact test set (full pipeline with TF-IDF retrieval;
shared README): sentence-level F1 39.5, abstract-level F1 46.5.

``--llm openai`` (the roles settings' OpenAI-compatible endpoint, ``AISAC_ROLES_LLM_BASE_URL`` ...) judges every
claim and cited abstract with the configured model instead, through the evaluator's ``support`` prompt
(:func:`judge_records_model`), and reports the label figures (label accuracy, "supported" and "contradicts"
precision / recall, no-evidence abstention); the model gives no rationale sentences and no probability.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import Context, Skip, table, temp_dir

SCIFACT = ("claims", "scifact")
#: published VeriSci figures (SciFact test set, full pipeline; shared README, allenai/scifact leaderboard)
PUBLISHED = {"sentence_f1": 39.5, "abstract_f1": 46.5}
#: the split of the shared claims (by claim, claims sharing a cited abstract kept together)
SPLIT_SEED = 13
SPLIT_SHARES = (0.5, 0.25, 0.25)
EMBED_CACHE = Path(os.environ.get("AISAC_SUPPORT_EMBED_CACHE", "/tmp/aisac-support-embeddings.npz"))


def load_claims(path: Path) -> list[dict[str, Any]]:
    """Claims of a SciFact-format JSONL file: ``[{id, claim, evidence: {doc_id str: [{sentences, label}]},
    cited_doc_ids: [int]}]``. Raises ValueError naming the line of a malformed claim."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            c = json.loads(line)
            out.append(
                {
                    "id": c["id"],
                    "claim": str(c["claim"]),
                    "evidence": {str(k): v for k, v in (c.get("evidence") or {}).items()},
                    "cited_doc_ids": [int(d) for d in c["cited_doc_ids"]],
                }
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a SciFact claim ({type(exc).__name__}: {exc})") from exc
    return out


def load_corpus(path: Path, wanted: set[int] | None = None) -> dict[int, list[str]]:
    """doc_id -> abstract sentences of a SciFact-format corpus (only ``wanted`` ids when given)."""
    out = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            doc = int(d["doc_id"])
            if wanted is None or doc in wanted:
                out[doc] = [" ".join(str(s).split()) for s in d["abstract"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a SciFact abstract ({type(exc).__name__}: {exc})") from exc
    return out


def claim_groups(claims: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``claims`` in groups: claims that cite a common abstract (directly or through other claims) form one group,
    so that a split by group never puts one abstract in two parts. Groups in a fixed order (smallest claim id)."""
    parent: dict[Any, Any] = {}

    def find(x: Any) -> Any:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for c in claims:
        for d in c["cited_doc_ids"]:
            parent[find(("doc", d))] = find(("claim", c["id"]))
    groups: dict[Any, list[dict[str, Any]]] = {}
    for c in claims:
        groups.setdefault(find(("claim", c["id"])), []).append(c)
    return sorted(groups.values(), key=lambda g: min(str(c["id"]) for c in g))


def split(claims: list[dict[str, Any]], seed: int = SPLIT_SEED) -> dict[str, list[dict[str, Any]]]:
    """Train / validation / test parts of ``claims`` (50 / 25 / 25 % of the claims): the :func:`claim_groups` are
    shuffled with ``seed`` and taken in order until each part has its share."""
    groups = claim_groups(claims)
    order = np.random.default_rng(seed).permutation(len(groups))
    parts: dict[str, list[dict[str, Any]]] = {"train": [], "validation": [], "test": []}
    total = len(claims)
    for i in order:
        g = groups[int(i)]
        if len(parts["train"]) < SPLIT_SHARES[0] * total:
            parts["train"] += g
        elif len(parts["validation"]) < SPLIT_SHARES[1] * total:
            parts["validation"] += g
        else:
            parts["test"] += g
    return parts


class VectorCache:
    """Unit vectors of texts by sha1, kept in an ``.npz`` file under /tmp (never in the repository), so that
    training and the bench embed each SciFact sentence once."""

    def __init__(self, path: Path = EMBED_CACHE) -> None:
        self.path = path
        self.vecs: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path) as z:
                self.vecs = dict(zip([str(k) for k in z["keys"]], z["vecs"]))
        self._embedder: Any = None

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def embedder(self) -> Any:
        """The default MiniLM embedder on a private folder under /tmp (assembled offline)."""
        if self._embedder is None:
            from aisac_core.rag.embeddings import Embedder

            from .common import isolated_settings

            self._embedder = Embedder(isolated_settings(Path("/tmp/aisac-support-embedder")))
        return self._embedder

    def ensure(self, texts: list[str]) -> None:
        """Embed the texts not cached yet (batches of 512) and save the cache."""
        missing = sorted({t for t in texts if self.key(t) not in self.vecs})
        if not missing:
            return
        emb = self.embedder()
        for i in range(0, len(missing), 512):
            batch = missing[i : i + 512]
            for t, v in zip(batch, emb.embed_documents(batch)):
                self.vecs[self.key(t)] = np.asarray(v, dtype=np.float32)
        keys = sorted(self.vecs)
        np.savez(self.path, keys=np.array(keys), vecs=np.stack([self.vecs[k] for k in keys]))

    def get(self, text: str) -> np.ndarray:
        return self.vecs[self.key(text)]


def pairs(claims: list[dict[str, Any]], corpus: dict[int, list[str]]) -> list[dict[str, Any]]:
    """One record per (claim, cited abstract): ``{claim_id, claim, doc_id, sentences, label: SUPPORT|CONTRADICT|
    NEI, rationales: [[sentence index]], gold: set of rationale sentence indices}``. Raises ValueError when a cited
    abstract is not in ``corpus``."""
    out = []
    for c in claims:
        for d in c["cited_doc_ids"]:
            if d not in corpus:
                raise ValueError(f"claim {c['id']} cites abstract {d}, which is not in the corpus")
            ev = c["evidence"].get(str(d)) or []
            rats = [sorted(int(i) for i in r["sentences"]) for r in ev]
            out.append(
                {
                    "claim_id": c["id"],
                    "claim": " ".join(c["claim"].split()),
                    "doc_id": d,
                    "sentences": corpus[d],
                    "label": ev[0]["label"] if ev else "NEI",
                    "rationales": rats,
                    "gold": {i for r in rats for i in r},
                }
            )
    return out


def texts_of(records: list[dict[str, Any]]) -> list[str]:
    """Every claim and sentence the records need embedded."""
    out = []
    for r in records:
        out.append(r["claim"])
        out += r["sentences"]
    return out


def ece(probs: list[float], hits: list[int], bins: int = 10) -> tuple[float, list[dict[str, Any]]]:
    """Expected calibration error over ``bins`` equal-width bins of [0, 1] (Guo et al., ICML 2017: the
    sample-weighted mean of |accuracy - mean confidence| per bin) and the reliability table
    ``[{bin, n, mean_p, observed}]`` (non-empty bins)."""
    p = np.asarray(probs, dtype=float)
    y = np.asarray(hits, dtype=float)
    idx = np.minimum((p * bins).astype(int), bins - 1)
    total, rows = 0.0, []
    for b in range(bins):
        m = idx == b
        if not m.any():
            continue
        mp, obs = float(p[m].mean()), float(y[m].mean())
        total += m.sum() / len(p) * abs(mp - obs)
        rows.append({"bin": f"{b / bins:.1f}-{(b + 1) / bins:.1f}", "n": int(m.sum()), "mean_p": mp, "observed": obs})
    return float(total), rows


def ece_by_chance(probs: list[float], bins: int = 10, draws: int = 2000, seed: int = 7) -> dict[str, float]:
    """The ECE that sampling alone gives a **perfectly calibrated** probability on this many items: each outcome
    drawn as Bernoulli(p) from the same ``probs`` (``draws`` times, fixed ``seed``), the ECE of each draw measured as
    :func:`ece` does. Returns ``{median, p95}``: an ECE above the 95th percentile is miscalibration that the sample
    size does not explain; one below it cannot be told from sampling noise (a parametric bootstrap of the null
    hypothesis of calibration; cf. Vaicenavicius et al., "Evaluating model calibration in classification",
    AISTATS 2019, consistency resampling)."""
    p = np.asarray(probs, dtype=float)
    if len(p) == 0:
        return {"median": 0.0, "p95": 0.0}
    rng = np.random.default_rng(seed)
    idx = np.minimum((p * bins).astype(int), bins - 1)
    masks = [idx == b for b in range(bins)]
    masks = [m for m in masks if m.any()]
    got = np.empty(draws)
    for k in range(draws):
        y = (rng.random(len(p)) < p).astype(float)
        got[k] = sum(m.sum() / len(p) * abs(float(p[m].mean()) - float(y[m].mean())) for m in masks)
    return {"median": float(np.median(got)), "p95": float(np.quantile(got, 0.95))}


def bootstrap(
    records: list[dict[str, Any]], verdicts: list[dict[str, Any]], draws: int = 1000, seed: int = 11
) -> dict[str, list[float]]:
    """95 % bootstrap intervals (percentile, ``draws`` resamples of the **claims** with replacement, fixed ``seed``:
    a claim's abstracts move together) of the "supported" precision and of the ECE of P(support) (:func:`ece`);
    ``{supported_precision: [lo, hi], ece_support: [lo, hi]}`` (a resample with no "supports" verdict counts no
    precision)."""
    by_claim: dict[Any, list[int]] = {}
    for i, r in enumerate(records):
        by_claim.setdefault(r["claim_id"], []).append(i)
    groups = list(by_claim.values())
    p = np.array([v["p_support"] for v in verdicts], dtype=float)
    y = np.array([int(r["label"] == "SUPPORT") for r in records])
    shown = np.array([v["verdict"] == "supports" for v in verdicts])
    rng = np.random.default_rng(seed)
    precs, eces = [], []
    for _ in range(draws):
        idx = np.concatenate([groups[int(g)] for g in rng.integers(0, len(groups), len(groups))])
        if shown[idx].any():
            precs.append(float(y[idx][shown[idx]].mean()))
        eces.append(ece(p[idx].tolist(), y[idx].tolist())[0])

    def ci(v: list[float]) -> list[float]:
        return [float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))] if v else [0.0, 0.0]

    return {"supported_precision": ci(precs), "ece_support": ci(eces)}


def prf(tp: int, n_pred: int, n_gold: int) -> dict[str, float]:
    """Precision, recall and F1 (0 when undefined)."""
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def judge_records(records: list[dict[str, Any]], cache: VectorCache, model: Any = None) -> list[dict[str, Any]]:
    """The judge's verdict on every record (vectors from ``cache``, which must hold them)."""
    from aisac_core.roles.support_model import judge_vectors

    return [
        judge_vectors(r["claim"], r["sentences"], cache.get(r["claim"]), [cache.get(s) for s in r["sentences"]], model)
        for r in records
    ]


def judge_records_model(records: list[dict[str, Any]], store: Path, llm: str) -> list[dict[str, Any]]:
    """The configured model's verdict on every record (the evaluator's ``support`` prompt, one request per claim and
    cited abstract, the abstract's sentences as the cited text), in the shape of
    :func:`aisac_core.roles.support_model.judge_vectors`: ``supported`` -> supports, ``contradicted`` ->
    contradicts, ``partly`` / ``not supported`` -> does not address. The model selects no rationale sentences and
    gives no probability, so rationale selection, the sentence- and abstract-level F1 and the ECE do not apply
    (``rationale`` empty; P(support) is 1.0 or 0.0). ``store``: a private store for the model-call cache and trace.
    Raises :class:`aisac_core.roles.RolesError` when ``llm`` names no usable backend."""
    import anyio

    from aisac_core.roles.backends import ask_json, get_backend
    from aisac_core.roles.prompts import render
    from aisac_core.roles.schemas import load_schema

    from .common import make_core

    core = make_core(store)
    try:
        env = core.roles
        backend = get_backend(env.settings, llm)
        if backend is None:
            raise Skip(f"--llm {llm}: no model backend")
        to_verdict = {"supported": "supports", "contradicted": "contradicts"}
        out = []
        for n, r in enumerate(records):
            text, version = render(
                "support",
                {"task": r["claim"], "n": 1, "claim": r["claim"], "cited": " ".join(r["sentences"]),
                 "schema": load_schema("support")},
                env.settings.prompt_dir,
            )  # fmt: skip
            got = anyio.run(
                lambda text=text, version=version, n=n: ask_json(
                    env, backend, role="support", schema="support", prompt=text, prompt_version=version,
                    run_id=f"bench-support-{n}", parent_id=None,
                )
            )  # fmt: skip
            verdict = to_verdict.get(got["output"]["verdict"], "does not address")
            out.append(
                {
                    "verdict": verdict,
                    "probability": 1.0,
                    "p_support": float(verdict == "supports"),
                    "p_contradict": float(verdict == "contradicts"),
                    "rationale": [],
                    "sentences": [{"i": i, "p_rationale": 0.0} for i in range(len(r["sentences"]))],
                }
            )
        return out
    finally:
        core.close()


def evaluate(
    records: list[dict[str, Any]], verdicts: list[dict[str, Any]], rationale_threshold: float
) -> dict[str, Any]:
    """The figures of the module docstring from the records (:func:`pairs`) and their verdicts; rationale selection
    takes the sentences whose calibrated rationale probability is >= ``rationale_threshold``."""
    to_label = {"supports": "SUPPORT", "contradicts": "CONTRADICT", "does not address": "NEI"}
    sel_tp = sel_pred = sel_gold = 0
    sent_tp = sent_pred = sent_gold = 0
    abs_tp = abs_pred = abs_gold = 0
    correct_label = 0
    sup = {"tp": 0, "pred": 0, "gold": 0}
    con = {"tp": 0, "pred": 0, "gold": 0}
    probs, hits = [], []
    by_claim: dict[Any, list[str]] = {}
    no_evidence: set[Any] = set()
    claims_with_evidence: set[Any] = set()
    for r, v in zip(records, verdicts):
        label = to_label[v["verdict"]]
        gold = r["gold"]
        t_sel = v.get("rationale_threshold", rationale_threshold)  # a nested fold's own threshold
        selected = {s["i"] for s in v["sentences"] if s["p_rationale"] >= t_sel}
        sel_tp += len(selected & gold)
        sel_pred += len(selected)
        sel_gold += len(gold)
        correct_label += label == r["label"]
        if r["label"] != "NEI":
            claims_with_evidence.add(r["claim_id"])
            abs_gold += 1
            sent_gold += len(gold)
        if label != "NEI":
            abs_pred += 1
            pred = list(v["rationale"])
            sent_pred += len(pred)
            if label == r["label"]:
                first3 = set(pred[:3])
                if any(set(rat) <= first3 for rat in r["rationales"]):
                    abs_tp += 1
                for rat in r["rationales"]:
                    if set(rat) <= set(pred):
                        sent_tp += len(rat)
        sup["gold"] += r["label"] == "SUPPORT"
        con["gold"] += r["label"] == "CONTRADICT"
        if label == "SUPPORT":
            sup["pred"] += 1
            sup["tp"] += r["label"] == "SUPPORT"
        if label == "CONTRADICT":
            con["pred"] += 1
            con["tp"] += r["label"] == "CONTRADICT"
        probs.append(v["p_support"])
        hits.append(int(r["label"] == "SUPPORT"))
        by_claim.setdefault(r["claim_id"], []).append(v["verdict"])
    for cid in by_claim:
        if cid not in claims_with_evidence:
            no_evidence.add(cid)
    e, rel = ece(probs, hits)
    e_con, _ = ece([v["p_contradict"] for v in verdicts], [int(r["label"] == "CONTRADICT") for r in records])
    e_rat, _ = ece(
        [s["p_rationale"] for v in verdicts for s in v["sentences"]],
        [int(s["i"] in r["gold"]) for r, v in zip(records, verdicts) for s in v["sentences"]],
    )
    abstain = [cid for cid in no_evidence if "supports" not in by_claim[cid]]
    abstain_all = [cid for cid in no_evidence if all(x == "does not address" for x in by_claim[cid])]
    return {
        "claims": len(by_claim),
        "abstracts": len(records),
        "rationale_selection": prf(sel_tp, sel_pred, sel_gold),
        "sentence_level": prf(sent_tp, sent_pred, sent_gold),
        "abstract_level": prf(abs_tp, abs_pred, abs_gold),
        "label_accuracy": correct_label / len(records) if records else 0.0,
        "supported": {**prf(sup["tp"], sup["pred"], sup["gold"]), "n_pred": sup["pred"], "n_gold": sup["gold"]},
        "contradicts": {**prf(con["tp"], con["pred"], con["gold"]), "n_pred": con["pred"], "n_gold": con["gold"]},
        "ece_support": e,
        "ece_support_by_chance": ece_by_chance(probs),
        "ece_contradict": e_con,
        "ece_rationale": e_rat,
        "reliability": rel,
        "no_evidence_claims": len(no_evidence),
        "no_evidence_no_supported": len(abstain) / len(no_evidence) if no_evidence else None,
        "no_evidence_all_not_addressed": len(abstain_all) / len(no_evidence) if no_evidence else None,
    }


def print_figures(title: str, f: dict[str, Any]) -> None:
    """The figures of :func:`evaluate` as tables."""
    pct = lambda x: None if x is None else round(100 * x, 1)  # noqa: E731
    rows = [
        ("rationale selection (gold abstracts)", *(pct(f["rationale_selection"][k]) for k in ("precision", "recall", "f1")), "-"),
        ("sentence-level: selection + label", *(pct(f["sentence_level"][k]) for k in ("precision", "recall", "f1")), PUBLISHED["sentence_f1"]),
        ("abstract-level: label + rationale", *(pct(f["abstract_level"][k]) for k in ("precision", "recall", "f1")), PUBLISHED["abstract_f1"]),
        ("'supported' (supports verdict)", *(pct(f["supported"][k]) for k in ("precision", "recall", "f1")), "-"),
        ("'contradicts' verdict", *(pct(f["contradicts"][k]) for k in ("precision", "recall", "f1")), "-"),
    ]  # fmt: skip
    table(
        f"{title}: {f['claims']} claims, {f['abstracts']} cited abstracts (gold abstracts)",
        ["measure", "P %", "R %", "F1 %", "VeriSci F1 % (test, with retrieval)"],
        rows,
    )
    table(
        "calibration and abstention",
        ["measure", "value"],
        [
            ("label accuracy, 3 classes (%)", pct(f["label_accuracy"])),
            ("ECE of P(support), 10 bins", round(f["ece_support"], 4)),
            (
                "  the same from sampling alone if calibrated: median / 95th pct",
                f"{f['ece_support_by_chance']['median']:.4f} / {f['ece_support_by_chance']['p95']:.4f}",
            ),
            ("ECE of P(contradict), 10 bins", round(f["ece_contradict"], 4)),
            ("ECE of P(rationale) per sentence, 10 bins", round(f["ece_rationale"], 4)),
            (
                f"no-evidence claims ({f['no_evidence_claims']}): no 'supports' citation (%)",
                pct(f["no_evidence_no_supported"]),
            ),
            ("no-evidence claims: every citation 'does not address' (%)", pct(f["no_evidence_all_not_addressed"])),
        ],  # fmt: skip
    )
    table(
        "reliability of P(support) (per abstract)",
        ["bin", "n", "mean P", "observed"],
        [(r["bin"], r["n"], round(r["mean_p"], 3), round(r["observed"], 3)) for r in f["reliability"]],
    )


#: the figures of ``python bench/train_support.py --nested`` (nested cross-validation over all shared claims)
NESTED_FILE = Path(__file__).resolve().parent / "data" / "support_nested.json"


def nested_record(sha: str) -> dict[str, Any] | None:
    """The recorded nested cross-validation (:data:`NESTED_FILE`) when it measured the support model of sha256
    ``sha``; None when absent or recorded for another model (then ``python bench/train_support.py --nested``
    re-takes it)."""
    if not NESTED_FILE.exists():
        return None
    rec: dict[str, Any] = json.loads(NESTED_FILE.read_text(encoding="utf-8"))
    return rec if rec.get("model_sha256") == sha else None


def print_nested(fixed: dict[str, Any], nest: dict[str, Any]) -> None:
    """The fixed held-out split's headline figures beside the nested cross-validation's (:func:`nested_record`),
    with 95 % bootstrap intervals over claims and the ECE a perfectly calibrated probability would show."""
    n, b, hb = nest["figures"], nest["bootstrap_95"], nest["held_out_bootstrap_95"]

    def iv(v: list[float]) -> str:
        return f"[{v[0]:.3f}, {v[1]:.3f}]"

    def sup(f: dict[str, Any]) -> str:
        s = f["supported"]
        return f"{s['precision']:.3f} ({round(s['precision'] * s['n_pred'])} of {s['n_pred']})"

    rows = [
        ("claims / cited abstracts", f"{fixed['claims']} / {fixed['abstracts']}", f"{n['claims']} / {n['abstracts']}"),
        ("'supported' precision (target >= 0.90)", sup(fixed), sup(n)),
        ("  95 % bootstrap interval (claims resampled)", iv(hb["supported_precision"]), iv(b["supported_precision"])),
        ("ECE of P(support), 10 bins (target <= 0.05)", f"{fixed['ece_support']:.4f}", f"{n['ece_support']:.4f}"),
        ("  95 % bootstrap interval", iv(hb["ece_support"]), iv(b["ece_support"])),
        (
            "  ECE if perfectly calibrated: median / 95th pct",
            f"{fixed['ece_support_by_chance']['median']:.4f} / {fixed['ece_support_by_chance']['p95']:.4f}",
            f"{n['ece_support_by_chance']['median']:.4f} / {n['ece_support_by_chance']['p95']:.4f}",
        ),
        ("rationale selection F1 %", round(100 * fixed["rationale_selection"]["f1"], 1), round(100 * n["rationale_selection"]["f1"], 1)),
        ("abstract-level label F1 % (VeriSci 46.5)", round(100 * fixed["abstract_level"]["f1"], 1), round(100 * n["abstract_level"]["f1"], 1)),
        ("label accuracy, 3 classes %", round(100 * fixed["label_accuracy"], 1), round(100 * n["label_accuracy"], 1)),
        ("no-evidence claims without 'supported' %", round(100 * (fixed["no_evidence_no_supported"] or 0), 1), round(100 * (n["no_evidence_no_supported"] or 0), 1)),
    ]  # fmt: skip
    table(
        "support judge: the fixed held-out split beside nested cross-validation over all claims (each judged by "
        "models and calibration maps that never saw it; bench/train_support.py --nested)",
        ["measure", "held-out test split (shipped model)", "nested CV, all claims"],
        rows,
    )


def timing(records: list[dict[str, Any]], cache: VectorCache, n: int = 60) -> dict[str, Any]:
    """ms per citation of :func:`~aisac_core.roles.support_model.judge_passage` (embedding of every text included,
    nothing cached, warm embedder) over ``n`` records, for the whole abstract and for the evaluator's unit (the
    claim, the question and the cited sentence with one sentence on each side:
    :data:`aisac_core.roles.support.CONTEXT_SENTENCES`; the question is stood in for by the claim's first half);
    and the largest event-loop stall (ms) while judgements run in worker threads (:func:`anyio.to_thread.run_sync`)
    beside a 5 ms ticker."""
    import anyio

    from aisac_core.roles.support import CONTEXT_SENTENCES
    from aisac_core.roles.support_model import judge_passage, judge_vectors, load_model

    emb = cache.embedder()
    embed = emb.embed_documents
    load_model()
    embed(["warm up the embedder", "second sentence"])
    sample = records[:: max(1, len(records) // n)][:n]

    def unit(r: dict[str, Any]) -> dict[str, Any]:
        """What the evaluator's learned path does for one citation (``aisac_core.roles.support._learned``): one
        embedding call of claim, question and window, then the judge for the claim and for the question."""
        at = min(r["gold"]) if r["gold"] else 0
        lo = max(0, at - CONTEXT_SENTENCES)
        window = r["sentences"][lo : at + CONTEXT_SENTENCES + 1]
        words = r["claim"].split()
        question = " ".join(words[: max(3, len(words) // 2)]) + "?"
        vecs = embed([r["claim"], question, *window])
        judge_vectors(question, window, vecs[1], vecs[2:])
        return judge_vectors(r["claim"], window, vecs[0], vecs[2:])

    cost: dict[str, Any] = {}
    for name, fn in (
        ("abstract", lambda r: judge_passage(r["claim"], r["sentences"], embed)),
        ("evaluator_unit", unit),
    ):
        ms = []
        for r in sample:
            t0 = time.perf_counter()
            fn(r)
            ms.append((time.perf_counter() - t0) * 1000)
        ms.sort()
        cost[name] = {
            "ms_mean": statistics.mean(ms),
            "ms_p50": ms[len(ms) // 2],
            "ms_p95": ms[int(0.95 * (len(ms) - 1))],
        }

    def stall_of(work: bool) -> float:
        """Largest lateness (ms) of a 5 ms ticker on the event loop while 30 judgements run in worker threads
        (``work``), or, for the baseline, while the loop sleeps as long as they took."""
        worst = 0.0

        async def main() -> None:
            nonlocal worst
            done = False

            async def ticker() -> None:
                nonlocal worst
                while not done:
                    t0 = time.perf_counter()
                    await anyio.sleep(0.005)
                    worst = max(worst, (time.perf_counter() - t0) * 1000 - 5)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker)
                for r in sample[:30]:
                    if work:
                        await anyio.to_thread.run_sync(lambda r=r: judge_passage(r["claim"], r["sentences"], embed))
                    else:
                        await anyio.sleep(cost["abstract"]["ms_mean"] / 1000)
                done = True

        anyio.run(main)
        return worst

    stall, baseline = stall_of(True), stall_of(False)
    return {
        "citations": len(sample),
        "sentences_per_abstract": statistics.mean(len(r["sentences"]) for r in sample),
        **cost,
        "event_loop_max_stall_ms": stall,
        "event_loop_max_stall_idle_ms": baseline,
        "loadavg_1min": os.getloadavg()[0],
    }


def run(ctx: Context) -> dict[str, Any]:
    """The bench part (module docstring). ``ctx.options``: ``claims`` / ``corpus`` (paths; default: the held-out
    part of the shared train claims)."""
    from aisac_core.roles.support_model import load_model

    t0 = time.perf_counter()
    claims_file, corpus_file = ctx.options.get("claims"), ctx.options.get("corpus")
    if bool(claims_file) != bool(corpus_file):
        raise Skip("--claims and --corpus go together")
    if claims_file:
        claims = load_claims(Path(claims_file))
        corpus_path = Path(corpus_file)  # type: ignore[arg-type]
        setting = f"all {len(claims)} claims of {claims_file}"
    else:
        folder = ctx.data_dir.joinpath(*SCIFACT)
        if not (folder / "claims_train.jsonl").exists():
            raise Skip(f"{folder} is absent (SciFact claims)")
        claims = split(load_claims(folder / "claims_train.jsonl"))["test"]
        corpus_path = folder / "corpus.jsonl"
        setting = f"held-out part of the shared train claims ({len(claims)} claims, split by claim, seed {SPLIT_SEED})"
    corpus = load_corpus(corpus_path, {d for c in claims for d in c["cited_doc_ids"]})
    records = pairs(claims, corpus)
    llm = str(ctx.options.get("llm") or "none")
    if llm != "none":  # the configured model judges instead (the evaluator's support prompt)
        with temp_dir(ctx, "support") as tmp:
            verdicts = judge_records_model(records, tmp / "store", llm)
        figures = evaluate(records, verdicts, 2.0)
        print_figures(f"{setting}; judged by the model ({llm}): label figures only", figures)
        return {
            "status": "ok",
            "seconds": round(time.perf_counter() - t0, 1),
            "setting": setting,
            "judged_by": llm,
            "figures": figures,
            "summary": [
                {
                    "metric": "'supported' precision (model)",
                    "value": round(figures["supported"]["precision"], 3),
                    "target": ">= 0.90",
                    "met": figures["supported"]["precision"] >= 0.9,
                },
                {
                    "metric": "no-evidence claims without 'supported' (model)",
                    "value": figures["no_evidence_no_supported"],
                    "target": ">= 0.80",
                    "met": (figures["no_evidence_no_supported"] or 0) >= 0.8,
                },
            ],
        }
    cache = VectorCache()
    cache.ensure(texts_of(records))
    model = load_model()
    verdicts = judge_records(records, cache, model)
    figures = evaluate(records, verdicts, model.thresholds["rationale"])
    print_figures(setting, figures)
    nest = None if claims_file else nested_record(model.sha256)
    if nest:
        print_nested(figures, nest)
    cost = timing(records, cache)
    table(
        "cost per citation (embedding of every text + features + three models; nothing cached)",
        ["unit", "mean ms", "p50 ms", "p95 ms"],
        [
            (
                f"whole abstract ({cost['sentences_per_abstract']:.1f} sentences + claim)",
                *(round(cost["abstract"][k], 1) for k in ("ms_mean", "ms_p50", "ms_p95")),
            ),
            (
                "evaluator: cited sentence +-1, claim, question",
                *(round(cost["evaluator_unit"][k], 1) for k in ("ms_mean", "ms_p50", "ms_p95")),
            ),
        ],  # fmt: skip
        caption=f"{cost['citations']} citations; event loop max stall {cost['event_loop_max_stall_ms']:.1f} ms while "
        f"judging in worker threads ({cost['event_loop_max_stall_idle_ms']:.1f} ms with the loop idle as long); load "
        f"average {cost['loadavg_1min']:.1f} on {os.cpu_count()} CPUs",
    )
    summary = [
        {"metric": "rationale selection F1 %", "value": round(100 * figures["rationale_selection"]["f1"], 1)},
        {
            "metric": "abstract-level label F1 % (VeriSci 46.5)",
            "value": round(100 * figures["abstract_level"]["f1"], 1),
        },
        {
            "metric": "'supported' precision",
            "value": round(figures["supported"]["precision"], 3),
            "target": ">= 0.90",
            "met": figures["supported"]["precision"] >= 0.9,
        },
        {
            "metric": "ECE P(support)",
            "value": round(figures["ece_support"], 4),
            "target": "<= 0.05",
            "met": figures["ece_support"] <= 0.05,
        },
        {
            "metric": "no-evidence claims without 'supported'",
            "value": figures["no_evidence_no_supported"],
            "target": ">= 0.80",
            "met": (figures["no_evidence_no_supported"] or 0) >= 0.8,
        },
        *(
            [
                {
                    "metric": "'supported' precision, nested CV (all claims)",
                    "value": round(nest["figures"]["supported"]["precision"], 3),
                    "target": ">= 0.90",
                    "met": nest["figures"]["supported"]["precision"] >= 0.9,
                },
                {
                    "metric": "ECE P(support), nested CV (all claims)",
                    "value": round(nest["figures"]["ece_support"], 4),
                    "target": "<= 0.05",
                    "met": nest["figures"]["ece_support"] <= 0.05,
                },
            ]
            if nest
            else []
        ),
        {
            "metric": "judge ms per citation p50 (evaluator unit)",
            "value": round(cost["evaluator_unit"]["ms_p50"], 1),
            "target": "<= 30",
            "met": cost["evaluator_unit"]["ms_p50"] <= 30,
        },
    ]
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "setting": setting,
        "model_sha256": model.sha256,
        "figures": figures,
        "nested": {k: nest[k] for k in ("figures", "bootstrap_95", "held_out_bootstrap_95")} if nest else None,
        "cost": cost,
        "published": PUBLISHED,
        "summary": summary,
    }
