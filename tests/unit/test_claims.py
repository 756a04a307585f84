import pytest

from factbank.text.claims import ClaimComparison, compare


def same(new: str, old: str) -> bool:
    return compare(new, old).same_claim


# --- numbers --------------------------------------------------------------------------------


def test_different_port_is_not_the_same_claim():
    result = compare("The API listens on port 8081", "The API listens on port 8080")
    assert result == ClaimComparison(False, result.reason)
    assert "8081" in result.reason and "8080" in result.reason


def test_identical_text_is_the_same_claim():
    result = compare("The API listens on port 8080", "The API listens on port 8080")
    assert result.same_claim
    assert same("The API listens on port 8080", "  the api LISTENS on port 8080 ")


@pytest.mark.parametrize(
    "reworded",
    [
        "Port 8080 is where the API listens",
        "The API is listening on port 8080.",
        "API listens on port 8080 by default",
        "The API listens on port ８０８０",
    ],
)
def test_reworded_with_same_number_is_the_same_claim(reworded):
    assert same(reworded, "The API listens on port 8080")
    assert same("The API listens on port 8080", reworded)


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("run three replicas", "run two replicas"),
        ("run 3 replicas", "run two replicas"),
        ("retry twice", "retry 3 times"),
        ("error E0503 means a borrow conflict", "error E0502 means a borrow conflict"),
        ("db is at 10.0.0.6:5432", "db is at 10.0.0.5:5432"),
        ("API on port 8080 and 8081", "API on port 8080"),
    ],
)
def test_other_number_changes_are_not_the_same_claim(new, old):
    assert not same(new, old)


def test_number_words_match_digits():
    assert same("run 3 replicas", "run three replicas")


# --- units and versions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "other",
    [
        "limit memory to 2 GiB",
        "limit memory to 2048 MB",
        "limit memory to 2000 MB",
        "limit memory to 2GB",
        "limit memory to 2 gb",
    ],
)
def test_same_byte_amount_in_another_notation_is_the_same_claim(other):
    assert same(other, "limit memory to 2 GB")


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("limit memory to 3 GB", "limit memory to 2 GB"),
        ("limit memory to 2000 MB", "limit memory to 2 GiB"),  # no reading makes them equal
        ("limit memory to 2 TB", "limit memory to 2 GB"),
        ("limit memory to 512 MB", "limit memory to 512 KB"),
    ],
)
def test_different_byte_amounts_are_not_the_same_claim(new, old):
    result = compare(new, old)
    assert not result.same_claim
    assert result.reason.startswith("amounts differ")


def test_time_units():
    assert same("the timeout is 30 seconds", "the timeout is 30s")
    assert same("the timeout is 2 min", "the timeout is 120 seconds")
    assert not same("the timeout is 30 ms", "the timeout is 30s")
    assert same("超时时间是 30 秒", "超时时间是 30s")


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        ("requires node v1.3", "requires node v1.2", False),
        ("requires node 1.2", "requires node v1.2", True),
        ("requires node 1.2.0", "requires node 1.2", False),  # 1.2 may mean the 1.2 line
        ("pin python 3.11", "pin python 3.12", False),
        ("pin Python 3.11", "pin python 3.11", True),
    ],
)
def test_versions(new, old, expected):
    assert same(new, old) is expected


# --- negation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("do not use pnpm", "use pnpm"),
        ("use pnpm", "do not use pnpm"),
        ("don't use pnpm", "use pnpm"),
        ("never run migrations by hand", "run migrations by hand"),
        ("deploy without tests", "deploy with tests"),
        ("pnpm is not allowed here", "pnpm is allowed here"),
        ("不要用 npm", "用 npm"),
        ("禁止提交密钥", "提交密钥"),
        ("服务没有启用缓存", "服务启用缓存"),
        ("未配置代理", "配置代理"),
        ("这个库不好", "这个库好"),
    ],
)
def test_negation_flips_the_claim(new, old):
    result = compare(new, old)
    assert not result.same_claim
    assert result.reason.startswith("negation differs")


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Never use npm", "Do not use npm"),
        ("use pnpm, not npm", "don't use npm, use pnpm"),
        ("别用 npm 安装依赖", "不要用 npm 安装依赖"),
        ("用 pnpm，不要用 npm", "用 pnpm, 不要用 npm"),
    ],
)
def test_same_negation_in_other_words_is_the_same_claim(new, old):
    assert same(new, old)


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("use npm, not pnpm", "use pnpm, not npm"),
        ("用 npm，不要用 pnpm", "用 pnpm，不要用 npm"),
    ],
)
def test_negating_the_other_thing_is_not_the_same_claim(new, old):
    assert not same(new, old)


def test_words_that_only_look_negative_are_not_negations():
    assert same("这个库不错, 推荐使用", "这个库不错, 推荐使用它")
    assert same("计费服务的别名是 ledgerline", "ledgerline 是计费服务的别名")


# --- Chinese --------------------------------------------------------------------------------


def test_chinese_port_change():
    assert not same("服务监听 8081 端口", "服务监听 8080 端口")
    assert same("服务监听 8080 端口", "服务监听8080端口")
    assert same("8080 端口由服务监听", "服务监听 8080 端口")


def test_chinese_numerals():
    assert not same("部署两个副本", "部署三个副本")
    assert same("部署三个副本", "部署 3 个副本")
    assert same("部署一个副本", "部署副本")  # 一个 is an article, not a count


def test_chinese_word_inside_a_longer_one_counts():
    assert same("用 pnpm 装依赖", "用 pnpm 安装依赖")
    assert same("用 pnpm 安装依赖", "使用 pnpm 安装依赖")


# --- containment ----------------------------------------------------------------------------


def test_added_detail_is_the_same_claim():
    assert same("use the user cache", "use the cache")
    assert same("use pnpm in every package of the monorepo", "use pnpm")
    assert same("use pnpm", "use pnpm in every package of the monorepo")


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("use yarn for installs", "use pnpm for installs"),
        ("the cache is at ~/.cache/npm", "the cache is at ~/.cache/pnpm"),
        ("use blocking IO", "use non-blocking IO"),  # whole tokens: no part-matching
        ("turn caching off", "turn caching on"),
        ("log out first", "log in first"),
        ("you may use pnpm", "you must use pnpm"),
        ("use the system cache", "use the user cache"),
        ("run migrations before deploy", "run migrations after deploy"),
        ("用 yarn 安装依赖", "用 pnpm 安装依赖"),
    ],
)
def test_one_swapped_word_is_not_the_same_claim(new, old):
    result = compare(new, old)
    assert not result.same_claim
    assert result.reason.startswith("key words differ")


def test_inflection_is_tolerated():
    assert same("dependencies are cached", "the dependency is cached")
    assert same("logging is written to stderr", "logs are written to stderr")
    assert same("the API listened on 8080", "the API listens on 8080")
    assert same("using pnpm", "use pnpm")


def test_other_language_is_not_treated_as_the_same_claim():
    # No dictionary here: a cross-language restatement is stored and linked, never merged.
    assert not same("服务监听 8080 端口", "the service listens on port 8080")


def test_reason_is_always_given():
    for new, old in [("a 1", "a 1"), ("use x", "do not use x"), ("port 1", "port 2")]:
        assert compare(new, old).reason
