// factbank-opencode-plugin: written by `factbank install opencode`, removed by `factbank
// uninstall opencode` (a re-install rewrites it). OpenCode has no command hooks; this plugin
// hands each moment to factbank's own hook (`hooks.py <event> opencode`, the same code that
// serves Claude Code, Codex, Gemini CLI, Qwen Code and Copilot CLI), so the deadlines, the
// redaction and the silence when the service is down are the hook's. No imports beyond node.
import { spawn } from "node:child_process";

// The hook command (interpreter, flags, hooks.py), filled in by the installer.
const HOOK: string[] = /* factbank:hook */ [];
const BUDGET_MS = 3000; // the hook gives up after 0.9 s itself; this only bounds a stuck spawn

function runHook(event: string, payload: Record<string, unknown>): Promise<any> {
  return new Promise((resolve) => {
    let out = "";
    let done = false;
    const finish = (value: any) => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        resolve(value);
      }
    };
    let child: any;
    try {
      child = spawn(HOOK[0], [...HOOK.slice(1), event, "opencode"], { stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      resolve(null);
      return;
    }
    const timer = setTimeout(() => {
      try { child.kill("SIGKILL"); } catch { /* gone */ }
      finish(null);
    }, BUDGET_MS);
    child.on("error", () => finish(null));
    child.stdout.on("data", (d: any) => { out += String(d); });
    child.on("close", () => {
      try { finish(out.trim() ? JSON.parse(out) : null); } catch { finish(null); }
    });
    child.stdin.on("error", () => { /* the hook may exit before reading it all */ });
    child.stdin.end(JSON.stringify({ ...payload, timestamp: new Date().toISOString() }));
  });
}

function context(out: any): string {
  const text = out?.hookSpecificOutput?.additionalContext;
  return typeof text === "string" ? text : "";
}

export const FactbankPlugin = async (ctx: any) => {
  const cwd: string = ctx?.directory || ctx?.worktree || process.cwd();
  const args = new Map<string, unknown>(); // callID -> the tool's arguments
  return {
    "chat.message": async (input: any, output: any) => {
      const sessionID = String(input?.sessionID || output?.message?.sessionID || "");
      const parts: any[] = Array.isArray(output?.parts) ? output.parts : [];
      const first = parts.find((p) => p?.type === "text");
      if (!sessionID || !first) return;
      const prompt = parts.filter((p) => p?.type === "text" && !p.synthetic).map((p) => p.text).join("\n");
      const out = await runHook("user-prompt-submit", { session_id: sessionID, cwd, prompt });
      const text = context(out);
      if (!text) return;
      parts.push({ ...first, id: `${first.id}fb`, type: "text", synthetic: true, text });
    },
    "tool.execute.before": async (input: any, output: any) => {
      if (input?.callID) args.set(String(input.callID), output?.args ?? {});
    },
    "tool.execute.after": async (input: any, output: any) => {
      const callID = String(input?.callID || "");
      const toolArgs = args.get(callID) ?? {};
      args.delete(callID);
      const exit = output?.metadata?.exit;
      await runHook("post-tool-use", {
        session_id: String(input?.sessionID || ""), cwd, tool_name: String(input?.tool || ""),
        tool_input: toolArgs, tool_use_id: callID,
        tool_response: typeof exit === "number" ? `Exit code ${exit}` : "",
      });
    },
    event: async ({ event }: any) => {
      if (event?.type !== "session.idle") return;
      const sessionID = String(event?.properties?.sessionID || "");
      if (!sessionID) return;
      // A plugin cannot hold OpenCode's turn open: the hook keeps a due reminder in the
      // session's state and the session's next prompt carries it (hookmain).
      await runHook("stop", { session_id: sessionID, cwd, stop_hook_active: false });
    },
  };
};
