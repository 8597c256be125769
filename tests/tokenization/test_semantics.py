"""Behaviour of tinytorch.text.semantics on hand-made vectors (and count-based vectors of the built-in corpus)."""
import numpy as np
import pytest

from tinytorch.text.corpus import CATEGORIES, generate_corpus, word_category
from tinytorch.text.semantics import analogy, category_purity, cosine_similarity, nearest_neighbors, pca_2d


# ---------------------------------------------------------------- cosine_similarity

def test_cosine_of_vectors_is_a_float():
    similarity = cosine_similarity([1.0, 0.0], [1.0, 1.0])
    assert isinstance(similarity, float)
    assert similarity == pytest.approx(1 / np.sqrt(2))
    assert cosine_similarity([2, 0], [-5, 0]) == pytest.approx(-1.0)
    assert cosine_similarity([1, 0], [0, 3]) == pytest.approx(0.0)


def test_cosine_shapes_follow_a_at_b_transpose(rng):
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    assert cosine_similarity(a, b).shape == (4, 6)
    assert cosine_similarity(a, b[0]).shape == (4,)
    assert cosine_similarity(a[0], b).shape == (6,)
    assert np.allclose(cosine_similarity(a, b)[:, 0], cosine_similarity(a, b[0]))
    assert np.allclose(np.diag(cosine_similarity(a, a)), 1.0)


def test_cosine_is_scale_invariant_and_bounded(rng):
    a, b = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    assert np.allclose(cosine_similarity(a * 7.0, b * 0.1), cosine_similarity(a, b))
    assert np.all(np.abs(cosine_similarity(a, b)) <= 1.0)


def test_cosine_zero_vectors_give_zero_not_nan():
    assert cosine_similarity([0, 0, 0], [1, 2, 3]) == 0.0
    assert cosine_similarity([0, 0], [0, 0]) == 0.0
    matrix = np.array([[0.0, 0.0], [1.0, 0.0]])
    result = cosine_similarity(matrix, matrix)
    assert not np.isnan(result).any()
    assert np.allclose(result, [[0, 0], [0, 1]])


def test_cosine_shape_mismatch_names_the_shapes():
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        cosine_similarity([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match=r"\(2, 2, 2\)"):
        cosine_similarity(np.ones((2, 2, 2)), np.ones(2))


# ---------------------------------------------------------------- nearest_neighbors

# Two tight pairs and a vector between them: 0~1 point right, 2~3 point up, 4 is diagonal.
KNOWN = np.array([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9], [0.7, 0.7]])


def test_nearest_neighbors_of_a_known_configuration():
    ids, similarities = nearest_neighbors(KNOWN, 0, k=4)
    assert ids.tolist() == [1, 4, 3, 2]
    assert np.all(np.diff(similarities) <= 0)
    assert similarities[0] == pytest.approx(cosine_similarity(KNOWN[0], KNOWN[1]))
    assert nearest_neighbors(KNOWN, 2, k=1)[0].tolist() == [3]


def test_nearest_neighbors_self_exclusion():
    assert 0 not in nearest_neighbors(KNOWN, 0, k=4)[0]
    ids, similarities = nearest_neighbors(KNOWN, 0, k=5, exclude_self=False)
    assert ids[0] == 0 and similarities[0] == pytest.approx(1.0)


def test_nearest_neighbors_ties_go_to_the_smaller_id():
    assert nearest_neighbors(np.ones((5, 3)), 3, k=4)[0].tolist() == [0, 1, 2, 4]


def test_nearest_neighbors_accepts_numpy_integer_ids():
    assert nearest_neighbors(KNOWN, np.int64(2), k=np.int64(1))[0].tolist() == [3]


@pytest.mark.parametrize("k", [5, 6, 0, -1])
def test_nearest_neighbors_bad_k_names_k_and_vocabulary_size(k):
    with pytest.raises(ValueError, match=rf"k={k} .*vocabulary has 5 words"):
        nearest_neighbors(KNOWN, 0, k=k)


@pytest.mark.parametrize("query_id", [5, 100, -1])
def test_nearest_neighbors_query_out_of_range(query_id):
    with pytest.raises(IndexError, match=rf"query_id={query_id} .*0\.\.4"):
        nearest_neighbors(KNOWN, query_id)


def test_nearest_neighbors_needs_a_matrix():
    with pytest.raises(ValueError, match=r"\(V, d\).*\(3,\)"):
        nearest_neighbors(np.ones(3), 0, k=1)


# ---------------------------------------------------------------- analogy

def test_analogy_on_a_constructed_linear_example(rng):
    # word = attribute offsets + a small private direction; relation "male -> female" = +2 * gender
    dim = 12
    basis = np.eye(dim)
    royal, gender, young = basis[0], basis[1], basis[8]
    words = {
        "man": -gender + 0.2 * basis[2], "woman": gender + 0.2 * basis[3],
        "king": royal - gender + 0.2 * basis[4], "queen": royal + gender + 0.2 * basis[5],
        "boy": young - gender + 0.2 * basis[6], "girl": young + gender + 0.2 * basis[7],
    }
    names = list(words) + [f"noise{i}" for i in range(6)]
    vectors = np.vstack(list(words.values()) + [rng.normal(size=(6, dim)) * 0.3])
    find = names.index
    ids, similarities = analogy(vectors, find("man"), find("king"), find("woman"))
    assert names[ids[0]] == "queen" and similarities.shape == (1,)
    ids, _ = analogy(vectors, find("king"), find("queen"), find("boy"))
    assert names[ids[0]] == "girl"


def test_analogy_excludes_its_inputs():
    # b - a + c == c exactly here, so without exclusion the answer would be c itself
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.1, 1.0], [-1.0, 0.0]])
    ids, _ = analogy(vectors, 0, 1, 2, k=2)
    assert ids.tolist() == [3, 4]


def test_analogy_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="k=3 .*vocabulary has 5 words"):
        analogy(KNOWN, 0, 1, 2, k=3)
    with pytest.raises(IndexError, match="c=7"):
        analogy(KNOWN, 0, 1, 7)


# ---------------------------------------------------------------- pca_2d

def test_pca_recovers_the_dominant_direction(rng):
    direction = np.array([1.0, 2.0, -2.0]) / 3.0
    points = rng.normal(size=(300, 1)) * 5.0 * direction + 0.05 * rng.normal(size=(300, 3)) + 10.0
    projected = pca_2d(points)
    assert projected.shape == (300, 2)
    assert np.allclose(projected.mean(axis=0), 0.0, atol=1e-9)
    centred = points - points.mean(axis=0)
    first_axis = np.linalg.lstsq(centred, projected[:, 0], rcond=None)[0]
    # sign rule: the largest-magnitude component (here tied 2/3 vs -2/3, first one wins) is positive
    assert np.allclose(first_axis, direction, atol=0.02)
    assert projected[:, 0].var() > 100 * projected[:, 1].var()


def test_pca_sign_is_deterministic_under_sign_flips(rng):
    points = rng.normal(size=(50, 4)) * np.array([5.0, 3.0, 1.0, 0.5])
    projected = pca_2d(points)
    assert np.allclose(pca_2d(points[::-1])[::-1], projected)
    assert np.allclose(pca_2d(points), projected)


def test_pca_bad_shapes():
    with pytest.raises(ValueError, match=r"\(1, 3\)"):
        pca_2d(np.ones((1, 3)))
    with pytest.raises(ValueError, match=r"\(4, 1\)"):
        pca_2d(np.ones((4, 1)))


# ---------------------------------------------------------------- category_purity

LABELS = [name for name in ["animals", "foods", "vehicles", "colours", "numbers"] for _ in range(10)]


def test_purity_is_one_for_perfect_clusters(rng):
    clustered = np.repeat(np.eye(5) * 10.0, 10, axis=0) + rng.normal(size=(50, 5))
    assert category_purity(clustered, LABELS, k=5) == 1.0
    assert category_purity(clustered, np.array(LABELS, dtype=object), k=9) == 1.0


def test_purity_is_near_chance_for_random_vectors():
    chance = 9 / 49
    purity = np.mean([category_purity(np.random.default_rng(seed).normal(size=(50, 16)), LABELS, k=5)
                      for seed in range(10)])
    assert abs(purity - chance) < 0.06


def test_purity_ignores_unlabelled_rows(rng):
    clustered = np.repeat(np.eye(5) * 10.0, 10, axis=0) + rng.normal(size=(50, 5))
    # 30 unlabelled rows sitting right on top of the animal cluster must not count as neighbours
    decoys = np.tile(np.eye(5)[0] * 10.0, (30, 1))
    weights = np.vstack([decoys, clustered])
    assert category_purity(weights, [None] * 30 + LABELS, k=5) == 1.0


def test_purity_counts_each_neighbour():
    # two pairs of directions at angles 0, 0.1 and 0.5, 0.6 radians: with k=1 every neighbour shares the
    # label; with k=2 each word's second neighbour is from the other pair -> 0.5
    angles = np.array([0.0, 0.1, 0.5, 0.6])
    weights = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    assert category_purity(weights, ["a", "a", "b", "b"], k=1) == 1.0
    assert category_purity(weights, ["a", "a", "b", "b"], k=2) == pytest.approx(0.5)


def test_purity_bad_inputs():
    weights = np.ones((4, 2))
    with pytest.raises(ValueError, match="labels has 3 entries but weights has 4 rows"):
        category_purity(weights, ["a", "b", "c"])
    with pytest.raises(ValueError, match="k=3 .*labelled rows, which is 3"):
        category_purity(weights, ["a", "b", "a", None], k=3)


def test_count_based_vectors_of_the_corpus_have_high_purity():
    """The built-in corpus carries its categories in context: PPMI + SVD vectors already cluster."""
    sentences = [line.split() for line in generate_corpus(2000, seed=0).splitlines()]
    vocabulary = sorted({word for sentence in sentences for word in sentence})
    word_id = {word: i for i, word in enumerate(vocabulary)}
    counts = np.zeros((len(vocabulary), len(vocabulary)))
    for sentence in sentences:
        for position, word in enumerate(sentence):
            for context in sentence[max(0, position - 2):position] + sentence[position + 1:position + 3]:
                counts[word_id[word], word_id[context]] += 1
    expected = counts.sum(1, keepdims=True) * counts.sum(0, keepdims=True) / counts.sum()
    with np.errstate(divide="ignore"):
        ppmi = np.maximum(np.log(counts / expected), 0)
    left, strengths, _ = np.linalg.svd(ppmi)
    vectors = left[:, :16] * strengths[:16]
    labels = [word_category(word) for word in vocabulary]
    assert sum(label is not None for label in labels) == sum(len(words) for words in CATEGORIES.values())
    assert category_purity(vectors, labels, k=5) >= 0.9
