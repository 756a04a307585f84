
import os

import pytest

from factbank.text.tokenizer import (
    STOPWORDS,
    cjk_share,
    content_words,
    language,
    tokenize,
    words,
)


@pytest.mark.parametrize(
    "text", ["", "   ", "。，！？", "...", "--- // :: ()", "的 了 是", "the of a"]
)
def test_empty_punctuation_and_stopword_only_text_gives_nothing(text):
    assert tokenize(text) == []


def test_mixed_chinese_english_instruction():
    assert tokenize("用 pnpm 安装依赖, 不要用 npm") == [
        "用", "pnpm", "安装", "依赖", "不要", "用", "npm"
    ]


def test_chinese_sentences():
    assert tokenize("服务监听 8080 端口") == ["服务", "监听", "8080", "端口"]
    assert tokenize("服务监听8080端口") == ["服务", "监听", "8080", "端口"]
    assert tokenize("数据库连接失败") == ["数据库", "数据", "连接", "失败"]
    assert tokenize("这个库的依赖是什么") == ["库", "依赖"]


def test_chinese_compounds_also_emit_their_halves():
    assert tokenize("配置文件") == ["配置文件", "配置", "文件"]
    assert tokenize("生产服务器") == ["生产", "服务器", "服务"]
    assert tokenize("端口号") == ["端口号", "端口"]  # not 口号 (slogan)
    assert "环境" in tokenize("环境变量") and "变量" in tokenize("环境变量")


def test_full_width_forms_are_normalised():
    assert tokenize("服务监听８０８０端口") == tokenize("服务监听8080端口")
    assert tokenize("ＡＰＩ") == ["api"]


def test_english_lowercased_and_stopwords_removed():
    assert tokenize("The API listens on port 8080.") == ["api", "listens", "port", "8080"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("snake_case_name", ["snake_case_name", "snake", "case", "name"]),
        ("CamelCase", ["camelcase", "camel", "case"]),
        ("getHTTPResponse", ["gethttpresponse", "get", "http", "response"]),
        ("os.path.join", ["os.path.join", "os", "path", "join"]),
        ("api.example.com", ["api.example.com", "api", "example", "com"]),
        ("src/app.py", ["src/app.py", "src", "app.py", "app", "py"]),
        ("__init__.py", ["__init__.py", "init", "py"]),
        ("--frozen-lockfile", ["frozen-lockfile", "frozen", "lockfile"]),
        (".env", [".env", "env"]),
        ("~/.cache/pnpm", ["~/.cache/pnpm", "cache", "pnpm"]),
        ("user@example.com", ["user@example.com", "user", "example.com", "example", "com"]),
    ],
)
def test_identifiers_kept_whole_and_emit_parts(text, expected):
    assert tokenize(text) == expected


def test_absolute_path():
    toks = tokenize("Edit /etc/nginx/nginx.conf then reload")
    assert toks[:2] == ["edit", "/etc/nginx/nginx.conf"]
    assert {"etc", "nginx", "nginx.conf", "conf", "reload"} <= set(toks)


def test_host_port_split_into_host_and_port():
    toks = tokenize("connect to db.internal:5432")
    assert toks[:2] == ["connect", "db.internal:5432"]
    assert {"db.internal", "5432", "db", "internal"} <= set(toks)


def test_ip_and_port_numbers_are_not_split():
    toks = tokenize("PostgreSQL 16 on 10.0.0.5:5432")
    assert {"postgresql", "16", "10.0.0.5:5432", "10.0.0.5", "5432"} <= set(toks)
    assert "10" not in toks and "0" not in toks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("E0502", ["e0502"]),
        ("ECONNREFUSED", ["econnrefused"]),
        ("port 8080", ["port", "8080"]),
        ("Python 3.11", ["python", "3.11"]),
        ("v1.2.3", ["v1.2.3", "1.2.3"]),
        ("node v18", ["node", "v18", "18"]),
        ("HTTP2 and IPv6", ["http2", "ipv6"]),
        ("C++ and c#", ["c++", "c#"]),
        ("iPhone OAuth", ["iphone", "oauth"]),
        ("JavaScript on GitHub", ["javascript", "java", "script", "github", "git", "hub"]),
    ],
)
def test_codes_versions_and_numbers(text, expected):
    assert tokenize(text) == expected


def test_url():
    toks = tokenize("see https://api.example.com:8443/v1/users?id=3")
    assert "https://api.example.com:8443/v1/users" in toks
    assert {"api.example.com", "8443", "v1", "users", "id", "3"} <= set(toks)


def test_punctuation_inside_prose_splits_but_not_inside_identifiers():
    assert tokenize("(see: foo_bar, baz.qux!)") == [
        "see", "foo_bar", "foo", "bar", "baz.qux", "baz", "qux"
    ]
    assert tokenize("KEY=value $HOME") == ["key", "value", "home"]
    assert tokenize("end. Next") == ["end", "next"]


def test_contractions():
    assert tokenize("Don't use npm") == ["use", "npm"]
    assert tokenize("the user's cache") == ["user", "cache"]
    assert tokenize("it\u2019s fine") == ["fine"]


def test_words_keeps_order_stopwords_and_negations_but_no_parts():
    assert words("Don't use snake_case, it's not ours") == [
        "don't", "use", "snake_case", "it", "not", "ours"
    ]
    assert words("不要用 npm 安装依赖") == ["不要", "用", "npm", "安装", "依赖"]
    assert words("配置文件") == ["配置文件"]


def test_content_words_is_the_token_set():
    text = "用 pnpm 安装依赖, 不要用 npm; see src/app.py"
    assert content_words(text) == set(tokenize(text))
    assert content_words("Which port does the API listen on?") == {"port", "api", "listen"}


def test_stopwords_are_a_compact_frozenset_of_both_languages():
    assert isinstance(STOPWORDS, frozenset)
    assert {"the", "of", "is", "的", "了", "是"} <= STOPWORDS
    # words that flip a claim or name a thing are not stopwords
    assert not {"before", "after", "less", "use", "用", "禁止", "端口", "port"} & STOPWORDS
    assert len(STOPWORDS) < 400


def test_deterministic_across_processes():
    """The index is written by one process and queried by another: the same text must give
    the same tokens under any hash seed (a set iterated into the output would not)."""
    import subprocess
    import sys

    text = "部署到 api.example.com:8443, 然后重启 nginx 服务器"
    here = tokenize(text)
    assert here and "nginx" in here and "8443" in here
    code = f"from factbank.text.tokenizer import tokenize; print(repr(tokenize({text!r})))"
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == repr(here), f"PYTHONHASHSEED={seed}"



@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("服务监听 8080 端口", "zh"),
        ("用 pnpm 安装依赖, 不要用 npm", "zh"),
        ("The API listens on port 8080", "en"),
        ("用 pnpm install 安装 the deps", "mixed"),
        ("部署到 api.example.com", "mixed"),
        ("nginx 的配置", "mixed"),
        ("8080", "mixed"),
        ("", "mixed"),
    ],
)
def test_language(text, lang):
    assert language(text) == lang


def test_cjk_share_bounds():
    assert cjk_share("中文") == 1.0
    assert cjk_share("english only") == 0.0
    assert cjk_share("") == 0.0
    assert 0.0 < cjk_share("nginx 配置") < 1.0
