"""The shipped tree ensemble of :mod:`aisac_core.data.structure`, evaluated with numpy from LightGBM's text model
format (no LightGBM import at load time)."""

from __future__ import annotations

from typing import Any

from aisac_core.data.errors import DataError


class Forest:
    """A LightGBM multiclass tree ensemble read from LightGBM's text model format and evaluated with numpy.

    Importing LightGBM costs about 1.7 s and 80 MB here (it pulls in scikit-learn and scipy), more than a whole
    workbook load; the shipped model's trees are numerical splits only, so they are evaluated directly: at each
    node ``x[feature] <= threshold`` goes to the left child (LightGBM's rule for a numerical split without
    missing-value handling, ``decision_type`` 0 or 2: no NaN reaches the model), a negative child ``~k`` is leaf
    ``k``; a class's raw score is the sum of its trees' leaves (divided by the number of iterations for a random
    forest, ``average_output``) and the probabilities their softmax. ``bench/train_cell_types.py`` checks the
    result against ``lightgbm.Booster.predict``.

    Raises (constructor): DataError for a model text this reader does not handle (categorical splits, missing-value
    handling, another objective)."""

    def __init__(self, text: str) -> None:
        import numpy as np

        head, _, body = text.partition("\nTree=")
        meta = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
        if not meta.get("objective", "").startswith("multiclass"):
            raise DataError(f"table-structure model: objective {meta.get('objective')!r} is not multiclass")
        self.n_class = int(meta["num_class"])
        self.average = "\naverage_output" in head
        self.trees: list[tuple[Any, Any, Any, Any, Any]] = []
        for block in ("Tree=" + body).split("\nTree="):
            if "num_leaves=" not in block:
                continue
            kv = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
            if int(kv.get("num_cat", "0")):
                raise DataError("table-structure model: categorical splits are not supported")
            leaves = np.array(kv["leaf_value"].split(), dtype=float)
            if int(kv["num_leaves"]) == 1:
                self.trees.append((None, None, None, None, leaves))
                continue
            dt = np.array(kv["decision_type"].split(), dtype=int)
            if np.any(dt & 1) or np.any((dt >> 2) & 3):
                raise DataError("table-structure model: categorical or missing-value splits are not supported")
            self.trees.append(
                (
                    np.array(kv["split_feature"].split(), dtype=int),
                    np.array(kv["threshold"].split(), dtype=float),
                    np.array(kv["left_child"].split(), dtype=int),
                    np.array(kv["right_child"].split(), dtype=int),
                    leaves,
                )
            )
        if not self.trees or len(self.trees) % self.n_class:
            raise DataError("table-structure model: the tree count is not a multiple of the class count")
        # all trees as padded (tree, node) arrays, evaluated together one depth level at a time
        T = len(self.trees)
        M = max((len(x[0]) for x in self.trees if x[0] is not None), default=1)
        L = max(len(x[4]) for x in self.trees)
        self.feat = np.zeros((T, M), dtype=np.int64)
        self.thr = np.zeros((T, M))
        self.left = np.full((T, M), -1, dtype=np.int64)
        self.right = np.full((T, M), -1, dtype=np.int64)
        self.leaf = np.zeros((T, L))
        self.start = np.zeros(T, dtype=np.int64)
        for t, (feat, thr, left, right, leaves) in enumerate(self.trees):
            self.leaf[t, : len(leaves)] = leaves
            if feat is None:
                self.start[t] = -1  # a single leaf
                continue
            k = len(feat)
            self.feat[t, :k], self.thr[t, :k], self.left[t, :k], self.right[t, :k] = feat, thr, left, right

    def predict(self, X: Any) -> Any:
        """Class probabilities, shape (rows, classes), of feature rows ``X`` (shape (rows, features))."""
        import numpy as np

        X = np.asarray(X, dtype=float)
        n, T = X.shape[0], len(self.trees)
        if n <= 256:  # few rows: every tree at once, one depth level per step
            cols = np.arange(T)[None, :]
            rows = np.arange(n)[:, None]
            node = np.broadcast_to(self.start, (n, T)).copy()
            while (node >= 0).any():
                nd = np.maximum(node, 0)
                go_left = X[rows, self.feat[cols, nd]] <= self.thr[cols, nd]
                nxt = np.where(go_left, self.left[cols, nd], self.right[cols, nd])
                node = np.where(node >= 0, nxt, node)
            raw = self.leaf[cols, ~node].reshape(n, T // self.n_class, self.n_class).sum(axis=1)
        else:  # many rows: tree by tree, the rows still inside the tree per step
            raw = np.zeros((n, self.n_class))
            idx = np.arange(n)
            for t, (feat, thr, left, right, leaves) in enumerate(self.trees):
                if feat is None:
                    raw[:, t % self.n_class] += leaves[0]
                    continue
                node1 = np.zeros(n, dtype=np.int64)
                active = idx
                while active.size:
                    cur = node1[active]
                    node1[active] = np.where(X[active, feat[cur]] <= thr[cur], left[cur], right[cur])
                    active = active[node1[active] >= 0]
                raw[:, t % self.n_class] += leaves[~node1]
        if self.average:
            raw /= T // self.n_class
        raw -= raw.max(axis=1, keepdims=True)
        e = np.exp(raw)
        return e / e.sum(axis=1, keepdims=True)

    def num_feature(self) -> int:
        """The largest feature index a split uses, plus one."""
        return max((int(f.max()) + 1 for f, *_ in self.trees if f is not None), default=0)
