// factbank-extension (installed by `factbank install pi`; `factbank uninstall pi` removes it).
//
// Pi has no command hooks and no MCP, so this one file does both jobs for Pi:
// - injection: on each prompt (`before_agent_start`) it asks the recall service for the
//   session-start block (first prompt of a session) and the per-prompt block, and adds them as
//   one hidden message. The service keeps "each fact at most once per session".
// - tools: factbank_search / _add / _get / _confirm / _dispute / _supersede / _handoff over the
//   same HTTP API the MCP server uses, described in the same words: `factbank install pi` writes the
//   tool texts (factbank_client/assets/tools.toml) and the wire constants
//   (factbank_common/schema.py) into SHARED below, so this file is never installed as it
//   stands in the package.
// - the timeline: the session's start and end, and each edit, write and bash call (see
//   "the timeline" below), as the Claude Code and Codex hooks record theirs.
// Injection never hurts the session: every call has a 0.9 s deadline and every failure is
// logged to ~/.cache/factbank/pi.log and otherwise ignored.
// Config: the factbank client config (~/.config/factbank/config.toml, or $FACTBANK_CONFIG),
// read minimally, with the same environment overrides as the Python client (FACTBANK_URL,
// FACTBANK_RECALL_URL, FACTBANK_TOKEN, FACTBANK_TEAM_TOKEN). The project key is computed
// exactly like factbank_client/project.py, so Pi, Claude Code and Codex agree on it.
// Every FACTBANK_* variable read here is declared in factbank_client/settings.py, whose table
// (docs/cli.md, "Configuration (client side)") says it is read here too; a unit test compares.

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFile, execFileSync, spawn } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";

// Like the Claude Code / Codex hooks: FACTBANK_HOOK_TIMEOUT seconds, default 0.9.
const INJECT_TIMEOUT_MS = Math.round(1000 * (Number(process.env.FACTBANK_HOOK_TIMEOUT) || 0.9));
const TOOL_TIMEOUT_MS = 30000;
const AGENT = "pi";
const DEFAULT_URL = "http://127.0.0.1:8701";

// --- what the MCP server shares with this file (written in at install time) -----------------

interface ToolText {
  name: string;
  label: string;
  description: string;
  params: Record<string, string>; // parameter -> its description
}

interface Shared {
  tools: Record<string, ToolText>; // by the tool's key: search, add, get, ...
  messages: Record<string, string>;
  sourceKinds: string[];
  origins: string[];
  maxQuestions: number;
  searchLimit: number;
  searchLimitMax: number;
  verifyCommand?: string[]; // `python -m factbank_client.cli.main verify --quiet`
  codeCommand?: string[]; // `python -m factbank_client.cli.main code`: the local code graph
  anchorCommand?: string[]; // `python -m factbank_client.code.check`: a symbol source's check
}

export const SHARED: Shared = /* factbank:shared */ null as unknown as Shared;

// --- config ------------------------------------------------------------------------------

export interface Config {
  url: string;
  recallUrl: string;
  tokens: Record<string, string>; // bank label -> token
  teamCategories: string[];
}

function configPath(env: NodeJS.ProcessEnv): string {
  if (env.FACTBANK_CONFIG) return env.FACTBANK_CONFIG.replace(/^~(?=\/|$)/, os.homedir());
  const base = env.XDG_CONFIG_HOME || path.join(env.HOME || os.homedir(), ".config");
  return path.join(base, "factbank", "config.toml");
}

function tomlString(raw: string): string | undefined {
  const v = raw.trim();
  const m = /^"((?:[^"\\]|\\.)*)"|^'([^']*)'/.exec(v);
  if (!m) return undefined;
  if (m[2] !== undefined) return m[2];
  return m[1].replace(/\\(["\\nt])/g, (_s, c) => ({ n: "\n", t: "\t" } as any)[c] ?? c);
}

/** The few keys factbank's client config holds: url, recall_url, team_categories and
 * [banks.NAME] token. Anything else is ignored. */
export function parseConfig(text: string): { url?: string; recallUrl?: string;
                                             tokens: Record<string, string>;
                                             teamCategories: string[] } {
  const out = { tokens: {} as Record<string, string>, teamCategories: [] as string[] } as any;
  let section = "";
  for (const rawLine of text.split(/\r?\n/)) {
    const line = rawLine.trim();
    if (!line || line.startsWith("#")) continue;
    const header = /^\[\s*([^\]]+?)\s*\]/.exec(line);
    if (header) {
      section = header[1].replace(/\s*\.\s*/g, ".").replace(/"/g, "");
      continue;
    }
    const eq = line.indexOf("=");
    if (eq < 0) continue;
    const key = line.slice(0, eq).trim().replace(/"/g, "");
    const value = line.slice(eq + 1);
    if (section === "") {
      if (key === "url") out.url = tomlString(value);
      else if (key === "recall_url") out.recallUrl = tomlString(value);
      else if (key === "team_categories") {
        out.teamCategories = [...value.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'/g)]
          .map((m) => m[1] ?? m[2]);
      }
    } else if (section.startsWith("banks.") && key === "token") {
      const token = tomlString(value);
      if (token) out.tokens[section.slice("banks.".length)] = token;
    }
  }
  return out;
}

function nextPort(url: string): string {
  const u = new URL(url);
  const port = (u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80) + 1;
  u.port = String(port);
  return u.toString().replace(/\/$/, "");
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  let parsed: ReturnType<typeof parseConfig> = { tokens: {}, teamCategories: [] };
  try {
    parsed = parseConfig(fs.readFileSync(configPath(env), "utf-8"));
  } catch {
    // no config file: environment only
  }
  const tokens = { ...parsed.tokens };
  if (env.FACTBANK_TOKEN) tokens.personal = env.FACTBANK_TOKEN;
  if (env.FACTBANK_TEAM_TOKEN) tokens.team = env.FACTBANK_TEAM_TOKEN;
  const url = (env.FACTBANK_URL || parsed.url || DEFAULT_URL).replace(/\/+$/, "");
  const recall = (env.FACTBANK_RECALL_URL || parsed.recallUrl || nextPort(url)).replace(/\/+$/, "");
  return { url, recallUrl: recall, tokens, teamCategories: parsed.teamCategories };
}

/** Bank labels, personal first, then team, then the rest by name (like ClientConfig.banks). */
export function banks(cfg: Config): string[] {
  const rank = (b: string) => (b === "personal" ? 0 : b === "team" ? 1 : 2);
  return Object.keys(cfg.tokens).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

export function writeBank(cfg: Config, category?: string): string {
  if (category && cfg.teamCategories.includes(category) && cfg.tokens.team) return "team";
  if (cfg.tokens.personal) return "personal";
  const all = Object.keys(cfg.tokens);
  if (all.length === 1) return all[0];
  throw new Error("no personal bank configured (run `factbank login`)");
}

// --- the project key (a port of factbank_client/project.py) ------------------------------

function repoRoot(start: string): string | undefined {
  let dir: string;
  try {
    dir = fs.realpathSync(start);
  } catch {
    dir = path.resolve(start);
  }
  for (;;) {
    if (fs.existsSync(path.join(dir, ".git"))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

function gitDir(root: string): string {
  const dot = path.join(root, ".git");
  try {
    if (fs.statSync(dot).isFile()) {
      const target = fs.readFileSync(dot, "utf-8").trim().replace(/^gitdir:/, "").trim();
      const gd = fs.realpathSync(path.resolve(root, target));
      const common = path.join(gd, "commondir");
      if (fs.existsSync(common) && fs.statSync(common).isFile()) {
        return fs.realpathSync(path.resolve(gd, fs.readFileSync(common, "utf-8").trim()));
      }
      return gd;
    }
  } catch {
    // fall through
  }
  return dot;
}

/** The first remote's URL, `origin` first (configparser semantics: `key = value` or
 * `key: value`, keys case-insensitive, the rest of the line is the value). */
export function originUrl(gitConfig: string): string | undefined {
  const sections: Array<{ name: string; url?: string }> = [];
  let cur: { name: string; url?: string } | undefined;
  for (const raw of gitConfig.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      const name = header[1];
      cur = sections.find((s) => s.name === name);
      if (!cur) {
        cur = { name };
        sections.push(cur);
      }
      continue;
    }
    const m = /^(.*?)\s*[=:]\s*(.*)$/.exec(line);
    // configparser refuses the whole file on a key outside a section or a line without a
    // delimiter; project.py then falls back to the directory name, and so must this.
    if (!cur || !m) return undefined;
    if (m[1].toLowerCase() === "url") cur.url = m[2];
  }
  const remotes = sections.filter((s) => s.name.startsWith("remote "));
  remotes.sort((a, b) => Number(a.name !== 'remote "origin"') - Number(b.name !== 'remote "origin"'));
  for (const r of remotes) if (r.url) return r.url;
  return undefined;
}

const SCP = /^(?:[^@/]+@)?([^:/]+):(?!\/\/)(.+)$/;

function stripGit(s: string): string {
  return s.endsWith(".git") ? s.slice(0, -4) : s;
}

export function normaliseRemote(url: string): string {
  url = url.trim();
  let host: string;
  let p: string;
  if (url.includes("://")) {
    const rest = url.split("://").slice(1).join("://");
    const slash = rest.indexOf("/");
    const hostPart = slash < 0 ? rest : rest.slice(0, slash);
    p = slash < 0 ? "" : rest.slice(slash + 1);
    const at = hostPart.lastIndexOf("@");
    host = (at < 0 ? hostPart : hostPart.slice(at + 1)).split(":")[0];
  } else {
    const m = SCP.exec(url);
    if (!m) return stripGit(url.replace(/\/+$/, "")).toLowerCase();
    host = m[1];
    p = m[2];
  }
  p = stripGit(p.replace(/^\/+|\/+$/g, ""));
  return host ? `${host.toLowerCase()}/${p.toLowerCase()}` : p.toLowerCase();
}

export function projectKey(cwd: string): string | null {
  const root = repoRoot(cwd);
  if (!root) return null;
  let url: string | undefined;
  try {
    url = originUrl(fs.readFileSync(path.join(gitDir(root), "config"), "utf-8"));
  } catch {
    url = undefined;
  }
  return url ? normaliseRemote(url) : path.basename(root).toLowerCase();
}

// --- HTTP ---------------------------------------------------------------------------------

function logError(message: string): void {
  try {
    const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    const dir = path.join(base, "factbank");
    fs.mkdirSync(dir, { recursive: true });
    fs.appendFileSync(path.join(dir, "pi.log"), `${new Date().toISOString()} ${message}\n`);
  } catch {
    // best effort
  }
}

class HttpError extends Error {
  constructor(message: string, public status?: number) {
    super(message);
  }
}

async function call(cfg: Config, method: string, base: string, route: string, bank: string,
                    body: unknown, timeoutMs: number): Promise<any> {
  const token = cfg.tokens[bank];
  if (!token) throw new HttpError(`no token configured for bank ${bank}`);
  let res: Response;
  try {
    res = await fetch(base + route, {
      method,
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}`,
                 "X-Factbank-Agent": AGENT },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err: any) {
    throw new HttpError(`cannot reach ${base}: ${err?.name === "TimeoutError" ? "timed out" : err?.message ?? err}`);
  }
  const text = await res.text();
  let data: any = undefined;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!res.ok) {
    const detail = data?.detail ?? text.slice(0, 300) ?? res.statusText;
    const reasons = (data?.reasons ?? []).map((r: any) => `${r.field}: ${r.reason}`).join("; ");
    throw new HttpError(`[${bank}] ${res.status} ${detail}${reasons && !String(detail).includes(reasons) ? ` (${reasons})` : ""}`, res.status);
  }
  return data;
}

/** The bank that holds fact `id`: the only bank, else the first that does not answer 404. */
async function owner(cfg: Config, id: number): Promise<string> {
  const all = banks(cfg);
  if (all.length <= 1) return all[0] ?? "personal";
  for (const bank of all) {
    try {
      await call(cfg, "GET", cfg.url, `/v1/facts/${id}`, bank, undefined, TOOL_TIMEOUT_MS);
      return bank;
    } catch (err: any) {
      if (err?.status !== 404) throw err;
    }
  }
  throw new Error(`fact ${id} not found in any configured bank`);
}

// --- injection ------------------------------------------------------------------------------

// Facts left out of a block because this working tree contradicts them (verify before
// inject): sent back with the session's next blocks so the bank does not count them as seen.
const withheld = new Map<string, number[]>();

async function inject(cfg: Config, kind: "session" | "prompt", sessionId: string,
                      project: string | null, prompt: string | null, root?: string): Promise<string> {
  // Each bank gets its share of the injection budget, so the merged block stays within it.
  const body = { kind, session_id: sessionId, project, prompt, banks: Math.max(1, banks(cfg).length) };
  const check = root && process.env.FACTBANK_INJECT_CHECK !== "0" ? root : undefined;
  const answers = await Promise.all(banks(cfg).map(async (bank) => {
    const key = `${sessionId}\0${bank}`;
    const held = withheld.get(key) ?? [];
    try {
      const data = await call(cfg, "POST", cfg.recallUrl, "/v1/inject", bank,
                              held.length ? { ...body, withheld: held } : body, INJECT_TIMEOUT_MS);
      if (typeof data?.text !== "string") return "";
      const { text, left } = filterBlock(data.text.trim(), data.sources, check);
      if (check && Array.isArray(data.sources) && data.sources.length) {
        const shown = new Set((data.facts ?? []) as number[]);
        const now = [...new Set([...held.filter((i) => !shown.has(i)), ...left])].slice(-200);
        if (now.length) withheld.set(key, now); else withheld.delete(key);
      }
      return text;
    } catch (err: any) {
      logError(`inject ${kind} bank=${bank}: ${err?.message ?? err}`);
      return "";
    }
  }));
  return answers.filter((t) => t).join("\n\n");
}

// --- tool helpers -----------------------------------------------------------------------------

function text(t: string) {
  return { content: [{ type: "text", text: t }], details: {} };
}

// Text from a bank as one inert line (factbank_common/inert.py, the same rule and escapes; a
// test runs both): LF/CR escaped, tabs as spaces, controls and invisible characters (ANSI
// escapes, U+2028, zero-width, bidi) as \xNN/\uNNNN, at most `limit` characters.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}]/u;
export const INERT_LIMIT = 4000;

export function inert(value: unknown, limit = INERT_LIMIT): string {
  const s = value === null || value === undefined ? "" : String(value);
  let out = "";
  for (const ch of s) {
    if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += " ";
    else if (INVISIBLE.test(ch)) {
      const code = ch.codePointAt(0) ?? 0;
      const [mark, width] = code < 0x100 ? ["\\x", 2] : code < 0x10000 ? ["\\u", 4] : ["\\U", 8];
      out += mark + code.toString(16).padStart(width as number, "0");
    } else out += ch;
  }
  const chars = Array.from(out);
  return chars.length > limit ? chars.slice(0, Math.max(0, limit - 1)).join("") + "…" : out;
}

/** Each LF-separated line inert (a block of lines the services built). */
export function inertLines(t: string): string {
  return t.split("\n").map((line) => inert(line)).join("\n");
}

/** The writer question a search hit matched best, or null (content, or lexical only). */
export function matchedQuestion(hit: any): string | null {
  const m = hit?.match;
  return typeof m === "string" && m.startsWith("question: ") ? m.slice("question: ".length) : null;
}

/** One search hit as text: the fact line with its match, "below the gate" for a companion,
 * and the question it matched (like the MCP server's search output). */
export function hitLines(r: any): string[] {
  const match = typeof r.relevance === "number" ? r.relevance : undefined;
  const lines = [factLine(r.fact, r.bank, match, Boolean(r.companion))];
  const q = matchedQuestion(r);
  if (q) lines.push(`    (matched its question: ${JSON.stringify(inert(q, 500))})`);
  if (r.via) lines.push(`    (found via outdated #${r.via.superseded}, replaced because: ${inert(r.via.reason ?? "-")})`);
  return lines;
}

/** One fact as a line that leads with its id and trust (factbank_client/render.py fact_line;
 * a test runs both on the same facts). */
export function factLine(f: any, bank?: string, match?: number, companion = false): string {
  const src = f.source ?? {};
  const where = inert(`${src.kind ?? "?"} ${src.location ?? ""}`.trim(), 500);
  const trust = Number(f.effective_trust ?? f.trust ?? 0).toFixed(2);
  const status = f.status && f.status !== "active" ? ` ${inert(f.status, 40)}` : "";
  const tentative = f.tentative ? " tentative" : "";
  const matched = match === undefined ? "" : `, match ${match.toFixed(2)}`;
  const gate = companion ? ", below the gate" : "";
  return `#${f.id} [${bank ? bank + ", " : ""}trust ${trust}${status}${tentative}${matched}${gate}] ${inert(f.content)} ` +
    `(source: ${where}; tags: ${inert((f.tags ?? []).join(", ")) || "-"})`;
}

/** The schema of a fact's fields, described as `tool` describes them. */
export function factProps(tool: string) {
  const d = SHARED.tools[tool].params;
  return {
    content: { type: "string", description: d.content },
    category: { type: "string", description: d.category },
    source_kind: { type: "string", enum: SHARED.sourceKinds, description: d.source_kind },
    source_location: { type: "string", description: d.source_location },
    quote: { type: "string", description: d.quote },
    tags: { type: "array", items: { type: "string" }, minItems: 1, description: d.tags },
    questions: { type: "array", items: { type: "string" }, maxItems: SHARED.maxQuestions, description: d.questions },
    origin: { type: "string", enum: SHARED.origins, description: d.origin },
    tentative: { type: "boolean", description: d.tentative },
    project: { type: "string", description: d.project },
  };
}
const FACT_REQUIRED = ["content", "category", "source_kind", "source_location", "quote", "tags"];

// --- fingerprints, as factbank_client/staleness/fingerprint.py computes them -----------------
//
// A file source records the quoted region's sha256 (its lines, trailing blanks stripped,
// joined by "\n"), the file's git blob id (sha1 of "blob <size>\0" + bytes; "sha256:<hex>"
// outside git), HEAD and whether the file differs from HEAD's version; a commit source its
// commit. The location is stored relative to the repository root, as the Python client does.
// A file or quote not found here gets no fingerprint (the server's gate still applies).
// tests/unit/test_hooks_pi.py holds this to the Python module's digests.

const LOCATION_RE = /^(.+?)(?::(\d+)(?:-(\d+))?)?$/;
const HEX_RE = /^[0-9a-fA-F]{7,64}$/;

export function quoteSpans(text: string, quote: string): Array<[number, number]> {
  const words: string[] = [];
  const offsets: number[] = [];
  const lines: number[] = [];
  let pos = 0;
  let line = 1;
  let last = 0;
  for (const m of text.matchAll(/\S+/g)) {
    const at = m.index ?? 0;
    for (let i = last; i < at; i++) if (text[i] === "\n") line++;
    last = at;
    words.push(m[0]);
    offsets.push(pos);
    lines.push(line);
    pos += m[0].length + 1;
  }
  const hay = words.join(" ");
  const needle = quote.split(/\s+/).filter((w) => w).join(" ");
  const found: Array<[number, number]> = [];
  if (!needle) return found;
  const wordAt = (off: number) => {
    let lo = 0, hi = offsets.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (offsets[mid] <= off) lo = mid; else hi = mid - 1; }
    return lo;
  };
  for (let start = hay.indexOf(needle); start !== -1; start = hay.indexOf(needle, start + 1)) {
    found.push([lines[wordAt(start)], lines[wordAt(start + needle.length - 1)]]);
  }
  return found;
}

function gitOut(root: string, args: string[]): string[] {
  try {
    return String(execFileSync("git", ["-C", root, ...args], { stdio: ["ignore", "pipe", "ignore"], timeout: 10000 })).split("\n");
  } catch (err: any) {
    return err?.stdout ? String(err.stdout).split("\n") : [];
  }
}

/** factbank_client/safefs.py's `read`, for the one file Pi's add reads: `p` (from
 * the agent, relative to `cwd`) only when its real path is inside the repository's real path
 * (or `cwd`'s outside one), not in `.git`, a regular file; no NUL, `~`, backslash or overlong
 * path. A path refused is undefined: no fingerprint, nothing of that file hashed or sent. */
export function readInside(root: string | undefined, cwd: string, p: string, limit = 32 * 1024 * 1024): { file: string; data: Buffer } | undefined {
  if (!p || p.includes("\0") || p.startsWith("~") || p.includes("\\")) return undefined;
  if (Buffer.byteLength(p) > 4096 || p.split("/").some((c) => Buffer.byteLength(c) > 255)) return undefined;
  let top: string;
  let real: string;
  try {
    top = fs.realpathSync(root ?? cwd);
    real = fs.realpathSync(path.resolve(cwd, p));
  } catch {
    return undefined;
  }
  const rel = path.relative(top, real);
  if (rel === "" || rel.startsWith("..") || path.isAbsolute(rel)) return undefined;
  if (rel.split(path.sep).some((c) => c.toLowerCase() === ".git")) return undefined;
  let fd: number | undefined;
  try {
    fd = fs.openSync(real, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > limit) return undefined;
    return { file: real, data: fs.readFileSync(fd) };
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** factbank_client/staleness/worktree.py's `check` (verify before inject), the same answers: "holds"
 * (the file's blob is the fingerprint's, or the quote, whitespace normalised, is in it),
 * "not-holding" (readable here, the quote is not in it), "unknown" (anything this checkout
 * cannot tell: missing, over 1 MiB, binary, refused, ignored by git, a redacted quote). */
export const HOOK_LIMIT = 1024 * 1024;
export function checkHere(fact: any, root: string): [string, string] {
  const src = fact?.source ?? {};
  if (src.kind !== "file") return ["unknown", `a ${src.kind} source: nothing in the working tree to check`];
  const m = LOCATION_RE.exec(String(src.location ?? "").trim());
  const quote = String(fact?.quote ?? "");
  if (!m) return ["unknown", "no file in its location"];
  if (!quote.trim() || quote.includes("[REDACTED")) return ["unknown", "no quote this checkout can look for"];
  const fp = fact?.fingerprint ?? {};
  const p = String(fp.path || m[1]);
  const line = fp.line || m[2];
  const read = readInside(root, root, p, HOOK_LIMIT);
  if (!read) return ["unknown", `${p} is not read here`];
  const blob = typeof fp.file_blob === "string" ? fp.file_blob : "";
  if (blob) {
    let id: string;
    if (blob.startsWith("sha256:")) id = "sha256:" + createHash("sha256").update(read.data).digest("hex");
    else {
      const h = createHash(blob.length === 40 ? "sha1" : "sha256");
      h.update(`blob ${read.data.length}\0`);
      h.update(read.data);
      id = h.digest("hex");
    }
    if (id === blob) return ["holds", `${p} is unchanged`];
  }
  if (read.data.subarray(0, 8192).includes(0)) return ["unknown", `${p} is binary`];
  const norm = (t: string) => t.split(/\s+/).filter((w) => w).join(" ");
  if (norm(read.data.toString("utf-8")).includes(norm(quote))) return ["holds", `the quote is in ${p}`];
  // A symbol anchor (path::Qualified.name) may have moved to another file with its quote:
  // without a parser here that is not evidence, so it stays in the block (never hidden on a
  // guess); the post-commit verify, which parses, judges it.
  if (String(src.location ?? "").includes("::")) return ["unknown", `a symbol anchor whose quote left ${p}: judged by the next verify`];
  try {
    execFileSync("git", ["-C", root, "check-ignore", "-q", "--", p.startsWith("-") ? "./" + p : p],
                 { stdio: "ignore", timeout: 2000 });
    return ["unknown", `${p} is ignored by git here: this machine's own file`];
  } catch (err: any) {
    if (err?.status !== 1) return ["unknown", `git cannot tell whether ${p} is ignored here`];
  }
  return ["not-holding", `the quote is no longer at ${line ? `${p}:${line}` : p} in this working tree`];
}

export const NOTE_HEADER = "[factbank] Not holding in this checkout (left out of this block: the working tree no longer has their quote; the bank is told only by a commit):";

/** factbank_client/staleness/worktree.py's `filter_block`: the block without the facts that do not hold
 * here (only the facts section; a header left with no fact goes too), and a note naming them. */
export function filterBlock(text: string, sources: any[], root: string | undefined): { text: string; left: number[] } {
  if (!text || !Array.isArray(sources) || !sources.length || !root) return { text, left: [] };
  const out: Array<[number, string]> = [];
  for (const f of sources.slice(0, 50)) {
    try {
      const [state, why] = checkHere(f, root);
      if (state === "not-holding" && Number.isInteger(f.id)) out.push([f.id, why]);
    } catch { /* unknown: the fact stays */ }
  }
  if (!out.length) return { text, left: [] };
  const gone = new Set(out.map(([id]) => id));
  const factId = (ln: string) => { const m = /^- #(\d+) /.exec(ln); return m ? Number(m[1]) : undefined; };
  const lines: string[] = [];
  let header: number | undefined;
  let count = 0;
  const close = () => { if (header !== undefined && !count) lines.splice(header, 1); };
  for (const ln of text.split("\n")) {
    if (ln.startsWith("[factbank] ")) {
      close();
      header = ln.startsWith("[factbank] Remembered facts") ? lines.length : undefined;
      count = 0;
    } else if (header !== undefined) {
      const id = factId(ln);
      if (id !== undefined && gone.has(id)) continue;
      count++;
    }
    lines.push(ln);
  }
  close();
  return { text: [...lines, NOTE_HEADER, ...out.map(([id, why]) => `- #${id}: ${why}`)].join("\n"),
           left: out.map(([id]) => id) };
}

export function fingerprintOf(kind: string, location: string, quote: string, cwd: string): { location: string; fingerprint: any } | undefined {
  const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
  const root = repoRoot(cwd);
  if (kind === "commit") {
    const ref = location.trim();
    let commit = root && ref ? (gitOut(root, ["rev-parse", "--verify", "-q", `${ref}^{commit}`])[0] ?? "").trim() : "";
    if (!HEX_RE.test(commit)) commit = HEX_RE.test(ref) ? ref.toLowerCase() : "";
    if (!commit) return undefined;
    return { location, fingerprint: { quote_sha256: sha256(quote.split(/\s+/).filter((w) => w).join(" ")), commit } };
  }
  if (kind !== "file") return undefined;
  const m = LOCATION_RE.exec(location.trim());
  if (!m) return undefined;
  let lo = m[2] ? Number(m[2]) : undefined;
  let hi = m[3] ? Number(m[3]) : lo;
  let read = readInside(root, cwd, m[1]);
  if (!read) {
    read = readInside(root, cwd, location.trim());
    lo = hi = undefined;
    if (!read) return undefined;
  }
  const { file, data } = read;
  const text = data.toString("utf-8");
  let spans = quoteSpans(text, quote);
  if (lo !== undefined) spans = spans.filter(([a, b]) => a <= (hi as number) && b >= (lo as number));
  if (!spans.length) return undefined;
  const [first, last] = spans[0];
  const fileLines = text.split(/\r\n|\r|\n/);
  if (fileLines.length && fileLines[fileLines.length - 1] === "" && /[\r\n]$/.test(text)) fileLines.pop();
  const region = fileLines.slice(first - 1, last).map((l) => l.replace(/\s+$/, "")).join("\n");
  const rel = relativeToRoot(file, root, cwd);
  const inRepo = Boolean(root) && rel !== file;
  const fp: any = { quote_sha256: sha256(region), path: (inRepo ? rel : file).slice(0, 1000), line: first, lines: last - first + 1 };
  let commit = "";
  let headBlob = "";
  if (inRepo && root) {
    const out = gitOut(root, ["rev-parse", "HEAD", `HEAD:${rel}`]).map((l) => l.trim());
    commit = HEX_RE.test(out[0] ?? "") ? out[0] : "";
    headBlob = HEX_RE.test(out[1] ?? "") ? out[1] : "";
  }
  if (inRepo) {
    const h = createHash(commit.length === 64 ? "sha256" : "sha1");
    h.update(`blob ${data.length}\0`);
    h.update(data);
    fp.file_blob = h.digest("hex");
  } else {
    fp.file_blob = "sha256:" + sha256(data);
  }
  if (commit) {
    fp.commit = commit;
    fp.dirty = headBlob !== fp.file_blob;
  }
  const suffix = lo !== undefined ? `:${lo}` + (hi !== lo ? `-${hi}` : "") : "";
  return { location: (inRepo ? rel : m[1]) + suffix, fingerprint: fp };
}

/** this project's file-sourced facts re-checked at session start, in the
 * background, as the Claude Code / Codex SessionStart hook does (factbank_client/hook/verify.py):
 * a detached `factbank verify --quiet`, its line appended to ~/.cache/factbank/verify.log.
 * Nothing waits for it; FACTBANK_VERIFY=0 turns it off. */
export function startVerify(dir: string): boolean {
  try {
    const cmd = SHARED.verifyCommand;
    if (!cmd?.length || process.env.FACTBANK_VERIFY === "0" || !repoRoot(dir)) return false;
    const log = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "factbank", "verify.log");
    fs.mkdirSync(path.dirname(log), { recursive: true });
    const fd = fs.openSync(log, "a", 0o600);
    const child = spawn(cmd[0], cmd.slice(1), { cwd: dir, detached: true, stdio: ["ignore", fd, fd] });
    child.on("error", (err: any) => logError(`verify: ${err?.message ?? err}`));
    child.unref();
    fs.closeSync(fd);
    return true;
  } catch (err: any) {
    logError(`verify: ${err?.message ?? err}`);
    return false;
  }
}

/** A symbol source (`path::Qualified.name`, docs/staleness.md#symbol-anchors): checked and
 * fingerprinted by the Python client (`python -m factbank_client.code.check LOCATION QUOTE`,
 * the one digest there is), its refusal thrown as the tool's error, naming the field. */
export function anchorOf(location: string, quote: string, cwd: string): { location: string; fingerprint: any } | undefined {
  const cmd = SHARED.anchorCommand;
  if (!cmd?.length) return undefined; // an extension installed before symbol anchors: no fingerprint
  const out = JSON.parse(String(execFileSync(cmd[0], [...cmd.slice(1), location, quote],
    { cwd, stdio: ["ignore", "pipe", "ignore"], timeout: 30000 })));
  if (out.error) throw new Error(`refused: ${out.error}`);
  return { location: out.location, fingerprint: out.fingerprint };
}

export function buildFact(p: any, cwd: string): any {
  const fact: any = {
    content: p.content, category: p.category,
    source: { kind: p.source_kind, location: p.source_location ?? "" },
    quote: p.quote, tags: p.tags ?? [], origin: p.origin ?? "inferred",
    tentative: Boolean(p.tentative), agent: AGENT,
  };
  if (p.source_kind === "file" && String(p.source_location ?? "").includes("::")) {
    const seen = anchorOf(String(p.source_location), String(p.quote ?? ""), cwd);
    if (seen) {
      fact.source.location = seen.location;
      fact.fingerprint = seen.fingerprint;
    }
  } else {
    try {
      const seen = fingerprintOf(String(p.source_kind ?? ""), String(p.source_location ?? ""), String(p.quote ?? ""), cwd);
      if (seen) {
        fact.source.location = seen.location;
        fact.fingerprint = seen.fingerprint;
      }
    } catch (err: any) {
      logError(`fingerprint: ${err?.message ?? err}`);
    }
  }
  if (Array.isArray(p.questions) && p.questions.length) fact.questions = p.questions.map(String);
  const project = p.project === undefined || p.project === null ? projectKey(cwd) : p.project;
  if (project) fact.project = project;
  return fact;
}

// Where a write went and who can read it: render.audience in the Python client, word for word.
export function audience(answer: any, label: string): string {
  const v = answer?.visible_to;
  if (!v || typeof v !== "object") return label;
  const kind = String(v.kind || "?");
  const n = Number(v.members || 0);
  const names: string[] = (v.names ?? []).map(String);
  let out = `${kind} bank ${v.bank}`;
  if (label && label !== kind) out += ` (configured here as "${label}")`;
  out += `, visible to ${n} member${n === 1 ? "" : "s"}`;
  if (names.length) {
    const more = n - names.length;
    out += " (" + names.join(", ") + (more > 0 ? `, +${more} more` : "") + ")";
  }
  return out;
}

// Why a fact is not simply active (stale, under review): render.why_not_current in the Python
// client, word for word, without its superseded line (`get` says OUTDATED with the current fact).
export function whyNotCurrent(f: any): string[] {
  const when = (v: any) => String(v || "-").slice(0, 16).replace("T", " ");
  const lines: string[] = [];
  const stale = f.stale ?? {};
  if (f.status === "stale") {
    lines.push(`stale since ${when(stale.since)}: ${stale.reason || "its source changed"}`);
    const context = String(stale.context ?? "").split(/\r?\n/);
    if (context.length && context[context.length - 1] === "") context.pop();
    for (const line of context) lines.push(`    ${line}`);
  }
  const review = f.review;
  if (review && Object.keys(review).length) {
    lines.push(`under review since ${when(review.since)}: ${review.reason || "a fact it cites changed"} ` +
      `(cited fact #${review.cause}); not injected until confirmed`);
  }
  return lines;
}

export function outcomeText(o: any, bank: string): string {
  const f = o.fact;
  const lines = [`${o.status === "reinforced" ? "Reinforced existing" : "Stored"} fact #${f.id} in ${inert(audience(o, bank), 300)} (trust ${Number(f.trust).toFixed(2)}).`];
  for (const r of o.redacted ?? []) lines.push(`Redacted a ${inert(r.kind ?? "secret", 80)} from ${inert(r.field ?? "?", 80)}; never send secrets.`);
  if (o.possible_duplicate_of?.length) {
    const ids = o.possible_duplicate_of.map(Number);
    lines.push(`Similar but different claim(s) already stored: ${ids.map((i: number) => "#" + i).join(", ")}. ` +
      `If they no longer hold, call ${SHARED.tools.supersede.name} with replaces=[${[...ids, f.id].join(", ")}]; if they still hold, nothing to do.`);
  } else if (o.note) lines.push(inert(o.note));
  if (!f.questions?.length) lines.push(SHARED.messages.no_questions);
  return lines.join("\n");
}

// --- the timeline: what this session touched and ran, never facts ----------------
//
// Pi has no command hooks, so the extension records the session: its start (awaited, at most
// INJECT_TIMEOUT_MS, before its first block is asked for, so a handoff `--to pi` finds it),
// each edit/write and bash call as Pi reports its result (`tool_result`), and its end
// (`session_shutdown`, which `pi -p` awaits). The events and keys are those
// `factbank import-history pi` reads from Pi's session file (factbank_client/history/pi.py),
// so the server stores each once. A tool never waits for it: events go in the background;
// what the service did not take is sent again with the next events, and what is still unsent
// at the end goes to Pi's own local buffer (~/.cache/factbank/timeline-buffer-pi.jsonl, 0600),
// which the next Pi session sends first. A conflict the service answers is shown at
// the session's next tool result or prompt.

const TIMELINE_TIMEOUT_MS = 5000;
const MAX_UNSENT = 2000;
const MAX_BATCH = 500;
const CONFLICT_HEADER = "[factbank] Possible edit conflict (timeline, not facts):";

/** Where the timeline goes: the team bank (teammates coordinate there), else personal. */
export function timelineBank(cfg: Config): string | undefined {
  if (cfg.tokens.team) return "team";
  if (cfg.tokens.personal) return "personal";
  return Object.keys(cfg.tokens)[0];
}

/** The checked-out branch, read from HEAD; "" when detached or outside a repository. */
export function gitBranch(root: string | undefined): string {
  if (!root) return "";
  try {
    let git = path.join(root, ".git");
    if (fs.statSync(git).isFile()) {
      git = path.resolve(root, fs.readFileSync(git, "utf-8").trim().replace(/^gitdir:/, "").trim());
    }
    const head = fs.readFileSync(path.join(git, "HEAD"), "utf-8").trim();
    return head.startsWith("ref: refs/heads/") ? head.slice("ref: refs/heads/".length) : "";
  } catch {
    return "";
  }
}

/** `p` (absolute, or relative to `cwd`) relative to the repository root; as given outside it. */
export function relativeToRoot(p: string, root: string | undefined, cwd: string): string {
  if (!root) return p;
  let full = path.resolve(cwd, p);
  try {
    full = fs.realpathSync(full);  // repoRoot() is a real path: compare like with like
  } catch {
    // a file not there (any more): as given
  }
  const rel = path.relative(root, full);
  if (rel === "") return ".";
  return !rel.startsWith("..") && !path.isAbsolute(rel) ? rel.split(path.sep).join("/") : p;
}

function resultText(content: any): string {
  return Array.isArray(content) ? content.map((c: any) => (c?.type === "text" ? String(c.text ?? "") : "")).join("\n") : "";
}

/** The events of one finished tool call (history/pi.py's rule): edit/write touch `input.path`
 * unless they failed; bash records the command with exit code 0, or the N of its
 * "Command exited with code N" (a failure without one is left out). */
export function toolEvents(base: any, root: string | undefined, cwd: string, e: any): any[] {
  const name = String(e?.toolName ?? "");
  const input = e?.input ?? {};
  const key = `${e?.toolCallId}:0`;
  const at = new Date().toISOString();
  if (name === "edit" || name === "write") {
    if (e?.isError || typeof input.path !== "string" || !input.path) return [];
    return [{ ...base, kind: "file", key, at, path: relativeToRoot(input.path, root, cwd), tool: name }];
  }
  if (name === "bash") {
    if (typeof input.command !== "string" || !input.command.trim()) return [];
    const m = /Command exited with code (-?\d+)\s*$/.exec(resultText(e?.content));
    const code = e?.isError ? (m ? Number(m[1]) : undefined) : 0;
    if (code === undefined) return [];
    return [{ ...base, kind: "command", key, at, command: input.command.slice(0, 4000), tool: name, exit_code: code }];
  }
  return [];
}

/** Pi's own buffer of unsent events. Not the hooks' buffer: Node has no flock to share
 * theirs safely, and on a machine where only Pi runs no hook would ever send it. Pi sends its
 * own at the next session start (`adopt`). */
function bufferPath(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
  return path.join(base, "factbank", "timeline-buffer-pi.jsonl");
}

export class Timeline {
  unsent: any[] = [];
  inflight = new Set<Promise<void>>();
  warnings: string[] = [];

  /** Send `events` (and whatever an earlier send left), in the background. */
  send(cfg: Config, events: any[], session: string): Promise<void> {
    const bank = timelineBank(cfg);
    if (!bank) return Promise.resolve();
    const batch = [...this.unsent.splice(0), ...events];
    if (!batch.length) return Promise.resolve();
    const p = (async () => {
      const now = batch.slice(0, MAX_BATCH);
      this.unsent.push(...batch.slice(MAX_BATCH));
      try {
        const data = await call(cfg, "POST", cfg.url, "/v1/timeline/events", bank, { events: now }, TIMELINE_TIMEOUT_MS);
        for (const c of data?.conflicts ?? []) {
          if (c?.session_id === session && typeof c.warning === "string") this.warnings.push(c.warning);
        }
      } catch (err: any) {
        const status = Number(err?.status ?? 0);
        if (status >= 400 && status < 500 && ![401, 403, 408, 429].includes(status)) {
          logError(`timeline: ${now.length} events refused, dropped: ${err?.message ?? err}`);
        } else {
          this.unsent.unshift(...now);
          this.unsent.splice(0, Math.max(0, this.unsent.length - MAX_UNSENT));
          logError(`timeline: ${now.length} events kept for later: ${err?.message ?? err}`);
        }
      }
    })();
    this.inflight.add(p);
    p.finally(() => this.inflight.delete(p));
    return p;
  }

  /** What an earlier Pi session left in its buffer, taken (a rename, so two Pi sessions
   * starting at once never both take it) to be sent with this session's first events. */
  adopt(): void {
    const taken = `${bufferPath()}.${process.pid}`;
    try {
      fs.renameSync(bufferPath(), taken);
    } catch {
      return;  // nothing buffered
    }
    try {
      const lines = fs.readFileSync(taken, "utf-8").split("\n").filter((l) => l.trim());
      const events: any[] = [];
      for (const line of lines) {
        try { events.push(JSON.parse(line)); } catch { /* a torn line: dropped */ }
      }
      this.unsent.unshift(...events.slice(-MAX_UNSENT));
      fs.unlinkSync(taken);
    } catch (err: any) {
      logError(`timeline: cannot read the buffer: ${err?.message ?? err}`);
    }
  }

  /** The conflict lines not shown yet ("" if none), once. */
  takeWarnings(): string {
    const w = [...new Set(this.warnings.splice(0))].slice(0, 5);
    return w.length ? [CONFLICT_HEADER, ...w.map((x) => `- ${x}`)].join("\n") : "";
  }

  /** At the end: wait for the sends (bounded), leave what is unsent to the hooks' buffer. */
  async close(): Promise<void> {
    const all = Promise.allSettled([...this.inflight]);
    await Promise.race([all, new Promise((r) => setTimeout(r, TIMELINE_TIMEOUT_MS))]);
    if (!this.unsent.length) return;
    try {
      fs.mkdirSync(path.dirname(bufferPath()), { recursive: true });
      fs.appendFileSync(bufferPath(), this.unsent.map((e) => JSON.stringify(e) + "\n").join(""), { mode: 0o600 });
      this.unsent = [];
    } catch (err: any) {
      logError(`timeline: cannot buffer ${this.unsent.length} events: ${err?.message ?? err}`);
    }
  }
}

function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([p, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms))]);
}

/** The code graph's tools run `factbank code SUB ARG --limit N` in the session's directory
 * with the interpreter the installer found, and answer with its text: the index is local to
 * this machine (factbank_client/code), exactly as the stdio MCP server answers. */
export function runCode(args: string[], dir: string, timeoutMs = 120000): Promise<string> {
  const cmd = SHARED.codeCommand;
  if (!cmd?.length) return Promise.reject(new Error("the code tools need `factbank install pi` to have written the interpreter"));
  return new Promise((resolve, reject) => {
    execFile(cmd[0], [...cmd.slice(1), ...args], { cwd: dir, timeout: timeoutMs, maxBuffer: 8 << 20 },
      (err: any, stdout: any, stderr: any) => {
        if (err) reject(new Error(String(stderr || err.message).trim().split("\n").slice(-3).join(" ")));
        else resolve(String(stdout));
      });
  });
}

// --- the extension ----------------------------------------------------------------------------

export default function factbank(pi: any) {
  const T = SHARED.tools;
  const described = (tool: string) => ({ name: T[tool].name, label: T[tool].label, description: T[tool].description });
  let sessionId: string = randomUUID();
  let sessionBlockDue = true;
  let cwd = process.cwd();

  const currentSessionId = (ctx: any): string => {
    try {
      const id = ctx?.sessionManager?.getSessionId?.();
      if (typeof id === "string" && id) return id;
    } catch {
      // ephemeral session
    }
    return sessionId;
  };

  const timeline = new Timeline();
  const eventBase = (sid: string) => ({ session_id: sid, project: projectKey(cwd), agent: AGENT });

  pi.on("session_start", async (_event: any, ctx: any) => {
    sessionBlockDue = true;
    if (ctx?.cwd) cwd = ctx.cwd;
    sessionId = currentSessionId(ctx);
    timeline.adopt();
    startVerify(cwd);
    try {
      const root = repoRoot(cwd);
      const rel = root ? relativeToRoot(cwd, root, cwd) : "";
      const start = { ...eventBase(sessionId), kind: "session_start", key: "start",
                      at: new Date().toISOString(), machine: os.hostname().slice(0, 200),
                      branch: gitBranch(root), cwd: rel === "." ? "" : rel };
      await within(timeline.send(loadConfig(), [start], sessionId), INJECT_TIMEOUT_MS);
    } catch (err: any) {
      logError(`session_start timeline: ${err?.message ?? err}`);
    }
  });

  pi.on("tool_result", async (event: any, ctx: any) => {
    try {
      const sid = currentSessionId(ctx);
      const events = toolEvents(eventBase(sid), repoRoot(cwd), cwd, event);
      if (events.length) void timeline.send(loadConfig(), events, sid);
      const told = timeline.takeWarnings();  // an earlier edit's answer, shown with this result
      if (!told) return undefined;
      return { content: [...(event?.content ?? []), { type: "text", text: `\n\n${told}` }] };
    } catch (err: any) {
      logError(`tool_result: ${err?.message ?? err}`);
      return undefined;
    }
  });

  pi.on("session_shutdown", async (_event: any, ctx: any) => {
    try {
      const sid = currentSessionId(ctx);
      void timeline.send(loadConfig(), [{ ...eventBase(sid), kind: "session_end", key: "end",
                                           at: new Date().toISOString() }], sid);
      await timeline.close();
    } catch (err: any) {
      logError(`session_shutdown: ${err?.message ?? err}`);
    }
  });

  pi.on("before_agent_start", async (event: any, ctx: any) => {
    try {
      if (ctx?.cwd) cwd = ctx.cwd;
      const cfg = loadConfig();
      if (!banks(cfg).length) return undefined;
      const sid = currentSessionId(ctx);
      const project = projectKey(cwd);
      const prompt = typeof event?.prompt === "string" ? event.prompt.slice(0, 8000) : "";
      const wantSession = sessionBlockDue;
      sessionBlockDue = false;
      const [sessionText, promptText] = await Promise.all([
        wantSession ? inject(cfg, "session", sid, project, null, repoRoot(cwd)) : Promise.resolve(""),
        prompt.trim() ? inject(cfg, "prompt", sid, project, prompt, repoRoot(cwd)) : Promise.resolve(""),
      ]);
      const content = [timeline.takeWarnings(), sessionText, promptText].filter((t) => t).join("\n\n");
      if (!content) return undefined;
      return { message: { customType: "factbank", content: inertLines(content), display: false } };
    } catch (err: any) {
      logError(`before_agent_start: ${err?.message ?? err}`);
      return undefined;
    }
  });

  pi.registerTool({
    ...described("search"),
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: T.search.params.query },
        limit: { type: "integer", minimum: 1, maximum: SHARED.searchLimitMax, default: SHARED.searchLimit, description: T.search.params.limit },
        project: { type: "string", description: T.search.params.project },
      },
      required: ["query"],
    },
    async execute(_id: string, params: any) {
      const cfg = loadConfig();
      const limit = Number(params.limit ?? SHARED.searchLimit);
      const project = params.project === undefined || params.project === null ? projectKey(cwd) : params.project;
      const body: any = { query: params.query, limit, mode: "hybrid" };
      if (project) body.project = project;
      const results: any[] = [];
      const notes: string[] = [];
      const all = banks(cfg);
      const errors: string[] = [];
      for (const bank of all) {
        try {
          const data = await call(cfg, "POST", cfg.recallUrl, "/v1/search", bank, body, TOOL_TIMEOUT_MS);
          for (const r of data?.results ?? []) results.push({ ...r, bank });
          if (data?.degraded) notes.push(`(note: ${bank} search degraded: ${data.degraded})`);
        } catch (err: any) {
          errors.push(err?.message ?? String(err));
        }
      }
      if (errors.length && errors.length === all.length) throw new Error(errors[0]);
      results.sort((a, b) => Number(b.score ?? 0) - Number(a.score ?? 0));
      const lines: string[] = [];
      for (const r of results.slice(0, limit)) lines.push(...hitLines(r));
      if (!lines.length) lines.push("No stored fact matches; proceed, and add what you learn.");
      return text([...lines, ...notes, ...errors.map((e) => `(note: ${e})`)].join("\n"));
    },
  });

  pi.registerTool({
    ...described("add"),
    parameters: { type: "object", properties: factProps("add"), required: FACT_REQUIRED },
    async execute(_id: string, params: any) {
      const cfg = loadConfig();
      const bank = writeBank(cfg, params.category);
      const outcome = await call(cfg, "POST", cfg.url, "/v1/facts", bank, buildFact(params, cwd), TOOL_TIMEOUT_MS);
      return text(outcomeText(outcome, bank));
    },
  });

  pi.registerTool({
    ...described("get"),
    parameters: { type: "object", properties: { id: { type: "integer", description: T.get.params.id } }, required: ["id"] },
    async execute(_id: string, params: any) {
      const cfg = loadConfig();
      const bank = await owner(cfg, Number(params.id));
      const data = await call(cfg, "GET", cfg.url, `/v1/facts/${Number(params.id)}`, bank, undefined, TOOL_TIMEOUT_MS);
      const f = data.fact;
      const lines = [factLine(f, bank), `quote: ${JSON.stringify(inert(f.quote))}`,
        `questions: ${inert((f.questions ?? []).join(" | ")) || "-"}`,
        `category: ${inert(f.category, 100)}; project: ${inert(f.project || "-", 200)}; origin: ${inert(f.origin, 40)}`,
        ...whyNotCurrent(f).map((l) => inert(l))];
      for (const e of data.events ?? []) lines.push(`  ${String(e.created_at).slice(0, 16)} ${inert(e.kind, 40)}${e.reason ? ": " + inert(e.reason) : ""}`);
      for (const old of data.supersedes ?? []) lines.push(`replaced #${old.id}: ${inert(old.content)} (because: ${inert(old.supersede_reason ?? "-")})`);
      if (data.current && data.current.id !== f.id) lines.push(`OUTDATED; current: ${factLine(data.current)}`);
      return text(lines.join("\n"));
    },
  });

  const judge = (route: string, verb: string) => pi.registerTool({
    ...described(route),
    parameters: {
      type: "object",
      properties: { id: { type: "integer", description: T[route].params.id },
                    reason: { type: "string", description: T[route].params.reason } },
      required: ["id", "reason"],
    },
    async execute(_id: string, params: any) {
      const cfg = loadConfig();
      const id = Number(params.id);
      const bank = await owner(cfg, id);
      const f = await call(cfg, "POST", cfg.url, `/v1/facts/${id}/${route}`, bank, { reason: params.reason ?? "" }, TOOL_TIMEOUT_MS);
      return text(`${verb} #${f.id}: status ${f.status}, trust now ${Number(f.trust).toFixed(2)}.`);
    },
  });
  judge("confirm", "Confirmed");
  judge("dispute", "Disputed");

  pi.registerTool({
    ...described("supersede"),
    parameters: {
      type: "object",
      properties: {
        replaces: { type: "array", items: { type: "integer" }, minItems: 1, description: T.supersede.params.replaces },
        reason: { type: "string", description: T.supersede.params.reason },
        ...factProps("supersede"),
      },
      required: ["replaces", "reason", ...FACT_REQUIRED],
    },
    async execute(_id: string, params: any) {
      const cfg = loadConfig();
      const replaces = (params.replaces ?? []).map(Number);
      if (!replaces.length) throw new Error("supersede needs at least one fact id to replace");
      const bank = await owner(cfg, replaces[0]);
      const o = await call(cfg, "POST", cfg.url, "/v1/facts/supersede", bank,
        { fact: buildFact(params, cwd), replaces, reason: params.reason }, TOOL_TIMEOUT_MS);
      return text(`Stored fact #${o.fact.id} in ${audience(o, bank)}; it supersedes ${replaces.map((i: number) => "#" + i).join(", ")} (${params.reason}).`);
    },
  });

  const codeTool = (key: string, sub: string, arg: string, extra: string, dflt: number) => pi.registerTool({
    ...described(key),
    parameters: {
      type: "object",
      properties: {
        [arg]: { type: "string", minLength: 1, description: T[key].params[arg] },
        [extra]: extra === "project"
          ? { type: "string", description: T[key].params[extra] }
          : { type: "integer", minimum: 1, maximum: key === "search_code" ? 100 : 500, default: dflt, description: T[key].params[extra] },
      },
      required: [arg],
    },
    async execute(_id: string, params: any) {
      const args = [sub, String(params[arg] ?? "")];
      if (extra === "project" && params.project !== undefined && params.project !== null) args.push("--project", String(params.project));
      if (extra === "limit") args.push("--limit", String(Number(params.limit ?? dflt)));
      return text(await runCode(args, cwd));
    },
  });
  codeTool("find_callers", "callers", "symbol", "limit", 20);
  codeTool("find_references", "refs", "symbol", "limit", 20);
  codeTool("explain_symbol", "explain", "symbol", "project", 20);
  codeTool("search_code", "search", "query", "limit", 10);

  pi.registerTool({
    ...described("handoff"),
    parameters: {
      type: "object",
      properties: {
        text: { type: "string", minLength: 1, description: T.handoff.params.text },
        to_agent: { type: "string", description: T.handoff.params.to_agent },
        to_member: { type: "string", description: T.handoff.params.to_member },
        files: { type: "array", items: { type: "string" }, maxItems: 50, description: T.handoff.params.files },
        fact_ids: { type: "array", items: { type: "integer" }, maxItems: 50, description: T.handoff.params.fact_ids },
        project: { type: "string", description: T.handoff.params.project },
      },
      required: ["text"],
    },
    async execute(_id: string, params: any, _signal?: any, _update?: any, ctx?: any) {
      const cfg = loadConfig();
      const bank = timelineBank(cfg);
      if (!bank) throw new Error("no bank configured (run `factbank login`)");
      const project = params.project === undefined || params.project === null ? projectKey(cwd) : params.project;
      if (!project) throw new Error("a handoff is for the next session in a project: run in a repository or pass `project`; nothing was saved");
      const root = repoRoot(cwd);
      const body: any = { text: String(params.text ?? ""), project, agent: AGENT,
                          session_id: currentSessionId(ctx),
                          files: (params.files ?? []).map((f: any) => relativeToRoot(String(f), root, cwd)),
                          fact_ids: (params.fact_ids ?? []).map(Number) };
      if (params.to_agent) body.to_agent = String(params.to_agent);
      if (params.to_member) body.to_member = String(params.to_member);
      const out = await call(cfg, "POST", cfg.url, "/v1/handoffs", bank, body, TOOL_TIMEOUT_MS);
      const target = out.to_agent || out.to_member || "the next session";
      return text(`handoff #${out.id} for ${target} in ${project}, in ${audience(out, bank)}: it appears once, in that session's start block`);
    },
  });
}
