"""Which samples each batch of an epoch holds: index batches of indexable sources, and the
sharded views of iterable ones (every shard of an epoch gets a disjoint share)."""
from __future__ import annotations

import itertools

import numpy as np


def shard_iter(it, shard_id, num_shards):
    for i, item in enumerate(it):
        if i % num_shards == shard_id:
            yield item


def _n_of(item):
    x = item[0] if isinstance(item, tuple) else item
    return len(x)


def shard_drop_last_iter(it, shard_id, num_shards):
    """Shard ``shard_id`` of an iterable source with drop_last: items are read ``num_shards``
    at a time and a shard takes its item of a group only when the group is complete and,
    for the last group, every item in it has the full batch size (the largest seen); so every
    shard takes the same number of full batches (under DDP, unequal step counts hang the
    ranks in an all-reduce)."""
    prev, most = None, 0
    while True:
        group = list(itertools.islice(it, num_shards))
        if len(group) < num_shards:  # the end: an incomplete group is dropped on every shard
            break
        if prev is not None:
            most = max(most, max(_n_of(x) for x in prev))
            yield prev[shard_id]
        prev = group
    if prev is not None:
        most = max(most, max(_n_of(x) for x in prev))
        if all(_n_of(x) >= most for x in prev):
            yield prev[shard_id]


def epoch_batches(n, batch_size, *, epoch=0, shuffle=False, seed=None, shard_id=0, num_shards=1,
                  drop_last=False):
    """Sample indices of every batch of one shard and epoch.

    Shuffling permutes all ``n`` samples with ``default_rng([seed, epoch])`` (the same on
    every shard); shard ``i`` takes every ``num_shards``-th sample from position ``i``, so
    the shards partition the data set. With ``drop_last``, the order is first cut to a
    multiple of ``num_shards`` (every shard gets the same count) and each shard drops its
    last partial batch; otherwise each shard's last batch may be short.

    >>> [b.tolist() for b in epoch_batches(10, 3, shard_id=1, num_shards=2)]
    [[1, 3, 5], [7, 9]]
    """
    order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
    if drop_last:
        order = order[:n // num_shards * num_shards]
    mine = order[shard_id::num_shards]
    nb = len(mine) // batch_size if drop_last else -(-len(mine) // batch_size)
    return [mine[i * batch_size:(i + 1) * batch_size] for i in range(nb)]



__all__ = ["epoch_batches", "shard_iter", "shard_drop_last_iter"]
