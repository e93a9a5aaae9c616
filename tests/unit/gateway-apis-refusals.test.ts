// What the gateway must refuse (issue 10 item 2): a request Pi really sent (fixtures) with one
// thing added that makes the provider act for the sandbox: another model, a provider-side
// server tool, an MCP connector, content fetched from a URL or a file store, stored state, or a
// beta flag Pi never sends. The unchanged requests pass (gateway-apis-requests.test.ts).
import { describe, expect, it } from "vitest";
import { PI_ANTHROPIC_BETAS } from "../../src/gateway/apis/anthropic-messages.js";
import { codecFor, type RequestPolicy } from "../../src/gateway/apis/api-codec.js";
import { captured, subpath } from "../support/api-codec-fixtures.js";

type Body = Record<string, unknown>;

function refusal(
  api: string,
  change: (body: Body) => void,
  options: { headers?: Record<string, string | string[]>; policy?: Partial<RequestPolicy> } = {},
): string | undefined {
  const { path, headers, body } = captured(api);
  const copy = structuredClone(body);
  change(copy);
  const policy = { model: `m-${api}`, ...options.policy };
  return codecFor(api)!.refusal(subpath(api, path), copy, { ...headers, ...options.headers }, policy);
}

const messages = (body: Body) => body.messages as Body[];
const addTool = (tool: Body) => (body: Body) => void (body.tools as Body[]).push(tool);

describe("openai-completions refusals", () => {
  const API = "openai-completions";

  it.each([
    ["web_search_options", (b: Body) => void (b.web_search_options = {}), /web search \("web_search_options"\)/],
    ["plugins", (b: Body) => void (b.plugins = [{ id: "web" }]), /plugin/],
    [
      "a fallback model",
      (b: Body) => void (b.models = ["m-openai-completions", "other-model"]),
      /model "other-model" \(models\)/,
    ],
    ["a hosted tool type", addTool({ type: "web_search_preview" }), /server tool \("web_search_preview"\)/],
  ])("%s", (_name, change, expected) => {
    expect(refusal(API, change)).toMatch(expected);
  });

  it("an image the provider would fetch, a file part; inline images pass", () => {
    const user = (part: Body) => (b: Body) => void messages(b).push({ role: "user", content: [part] });
    expect(refusal(API, user({ type: "image_url", image_url: { url: "https://attacker.example/x.png" } }))).toMatch(
      /fetch from a URL/,
    );
    expect(refusal(API, user({ type: "file", file: { file_id: "file-1" } }))).toMatch(
      /content part Pi never sends \("file"\)/,
    );
    expect(refusal(API, user({ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }))).toBeUndefined();
  });

  it("an OpenAI-Beta flag, unless the policy names it", () => {
    expect(refusal(API, () => {}, { headers: { "openai-beta": "assistants=v2" } })).toMatch(
      /openai-beta flag "assistants=v2"/,
    );
    expect(
      refusal(API, () => {}, {
        headers: { "openai-beta": "assistants=v2" },
        policy: { allowBetas: ["assistants=v2"] },
      }),
    ).toBeUndefined();
  });

  it("lets a server tool through when the policy names it", () => {
    expect(
      refusal(API, (b) => void (b.web_search_options = {}), { policy: { allowServerTools: ["web_search_options"] } }),
    ).toBeUndefined();
  });
});

describe("openai-responses refusals", () => {
  const API = "openai-responses";
  const input = (b: Body) => b.input as Body[];

  it.each([
    "web_search",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "mcp",
    "computer_use_preview",
    "image_generation",
    "local_shell",
  ])("the hosted tool %s", (type) => {
    expect(refusal(API, addTool({ type, server_url: "https://attacker.example/mcp" }))).toMatch(
      new RegExp(`server tool \\("${type}"\\)`),
    );
    expect(refusal(API, addTool({ type }), { policy: { allowServerTools: [type] } })).toBeUndefined();
  });

  it.each([
    ["previous_response_id", "resp_other"],
    ["conversation", "conv_1"],
    ["prompt", { id: "pmpt_1" }],
    ["background", true],
  ])("stored state: %s", (field, value) => {
    expect(refusal(API, (b) => void (b[field] = value))).toMatch(new RegExp(`"${field}"`));
  });

  it("input items and parts Pi never sends, images by URL or file id, server-side tool search", () => {
    expect(refusal(API, (b) => void input(b).push({ type: "item_reference", id: "msg_secret" }))).toMatch(
      /input item Pi never sends \("item_reference"\)/,
    );
    const user = (part: Body) => (b: Body) => void input(b).push({ role: "user", content: [part] });
    expect(refusal(API, user({ type: "input_image", image_url: "https://attacker.example/a.png" }))).toMatch(
      /input_image/,
    );
    expect(refusal(API, user({ type: "input_image", file_id: "file-1" }))).toMatch(/input_image/);
    expect(refusal(API, user({ type: "input_file", file_url: "https://attacker.example/a.pdf" }))).toMatch(
      /"input_file"/,
    );
    expect(
      refusal(API, (b) => void input(b).push({ type: "tool_search_call", execution: "server", arguments: {} })),
    ).toMatch(/tool search/);
    expect(
      refusal(
        API,
        (b) => void input(b).push({ type: "additional_tools", role: "developer", tools: [{ type: "web_search" }] }),
      ),
    ).toMatch(/"web_search"/);
  });

  it("another model", () => {
    expect(refusal(API, (b) => void (b.model = "gpt-expensive"))).toMatch(/model "gpt-expensive"/);
  });
});

describe("anthropic-messages refusals", () => {
  const API = "anthropic-messages";

  it.each([
    "web_search_20250305",
    "web_fetch_20250910",
    "code_execution_20250825",
    "computer_20250124",
    "bash_20250124",
    "mcp_toolset",
    "memory_20250818",
  ])("the server or Anthropic-defined tool %s", (type) => {
    expect(refusal(API, addTool({ type, name: type.split("_")[0] }))).toMatch(
      new RegExp(`server tool \\("${type}"\\)`),
    );
  });

  it("MCP connectors and code-execution containers", () => {
    const mcp = (b: Body) => void (b.mcp_servers = [{ type: "url", url: "https://attacker.example/mcp", name: "x" }]);
    expect(refusal(API, mcp)).toMatch(/MCP connector \("mcp_servers"\)/);
    expect(refusal(API, mcp, { policy: { allowServerTools: ["mcp_servers"] } })).toBeUndefined();
    expect(refusal(API, (b) => void (b.container = "container_1"))).toMatch(/"container"/);
  });

  it("beta flags outside Pi's own, in the header or the body", () => {
    expect(refusal(API, () => {}, { headers: { "anthropic-beta": "mcp-client-2025-04-04" } })).toMatch(
      /anthropic-beta flag "mcp-client-2025-04-04"/,
    );
    expect(
      refusal(API, () => {}, {
        headers: { "anthropic-beta": ["fine-grained-tool-streaming-2025-05-14", "files-api-2025-04-14"] },
      }),
    ).toMatch(/"files-api-2025-04-14"/);
    expect(refusal(API, (b) => void (b.betas = ["code-execution-2025-08-25"]))).toMatch(/code-execution/);
    expect(refusal(API, () => {}, { headers: { "anthropic-beta": PI_ANTHROPIC_BETAS.join(", ") } })).toBeUndefined();
    expect(
      refusal(API, () => {}, {
        headers: { "anthropic-beta": "web-fetch-2025-09-10" },
        policy: { allowBetas: ["web-fetch-2025-09-10"] },
      }),
    ).toBeUndefined();
  });

  it("content by URL or from the file store, blocks Pi never sends, tool additions of server tools", () => {
    const user = (block: Body) => (b: Body) => void messages(b).push({ role: "user", content: [block] });
    expect(
      refusal(API, user({ type: "image", source: { type: "url", url: "https://attacker.example/a.png" } })),
    ).toMatch(/"url-source"/);
    expect(refusal(API, user({ type: "image", source: { type: "file", file_id: "file_1" } }))).toMatch(/"file-source"/);
    expect(refusal(API, user({ type: "document", source: { type: "base64", data: "AAAA" } }))).toMatch(
      /content block Pi never sends \("document"\)/,
    );
    const toolResult = {
      type: "tool_result",
      tool_use_id: "t",
      content: [{ type: "image", source: { type: "url", url: "https://a.example" } }],
    };
    expect(refusal(API, user(toolResult))).toMatch(/url-source/);
    const addition = {
      role: "system",
      content: [
        {
          type: "tool_addition",
          tool: { type: "tool_definition", definition: { type: "web_search_20250305", name: "web_search" } },
        },
      ],
    };
    expect(refusal(API, (b) => void messages(b).push(addition))).toMatch(/web_search_20250305/);
  });

  it("server-side fallback to another model, not to the run's own", () => {
    expect(refusal(API, (b) => void (b.fallbacks = [{ model: "claude-other" }]))).toMatch(
      /"claude-other" \(fallbacks\[0\]\)/,
    );
    expect(refusal(API, (b) => void (b.fallbacks = [{ model: "m-anthropic-messages" }]))).toBeUndefined();
  });
});

describe("google-generative-ai refusals", () => {
  const API = "google-generative-ai";

  it.each([
    "googleSearch",
    "googleSearchRetrieval",
    "codeExecution",
    "urlContext",
    "fileSearch",
    "computerUse",
    "googleMaps",
  ])("the built-in tool %s, also next to function declarations", (key) => {
    expect(refusal(API, addTool({ [key]: {} }))).toMatch(new RegExp(`server tool \\("${key}"\\)`));
    expect(refusal(API, (b) => void Object.assign((b.tools as Body[])[0]!, { [key]: {} }))).toMatch(new RegExp(key));
  });

  it("cached content, files by URI, another model in the path", () => {
    expect(refusal(API, (b) => void (b.cachedContent = "cachedContents/x"))).toMatch(/"cachedContent"/);
    const file = {
      role: "user",
      parts: [{ fileData: { fileUri: "https://attacker.example/a.pdf", mimeType: "application/pdf" } }],
    };
    expect(refusal(API, (b) => void (b.contents as Body[]).push(file))).toMatch(/"fileData"/);
    const { headers, body } = captured(API);
    expect(
      codecFor(API)!.refusal("/models/gemini-pro:streamGenerateContent", body, headers, { model: `m-${API}` }),
    ).toMatch(/"gemini-pro" \(the URL path\)/);
  });

  // Google reads protobuf JSON: each field under its snake_case name too. Checks that look for
  // the camelCase names would let the twin through to the provider, with the real key.
  it.each([
    [
      "a response count",
      (b: Body) => void (b.generationConfig = { ...(b.generationConfig as Body), candidate_count: 8 }),
      "generationConfig.candidate_count",
    ],
    ["cached content", (b: Body) => void (b.cached_content = "cachedContents/x"), "cached_content"],
    [
      "a file by URI in the system instruction",
      (b: Body) =>
        void (b.system_instruction = {
          parts: [{ file_data: { file_uri: "https://attacker.example/a.pdf", mime_type: "application/pdf" } }],
        }),
      "system_instruction",
    ],
    [
      "a file by URI in a part",
      (b: Body) => void (b.contents as Body[]).push({ role: "user", parts: [{ file_data: { file_uri: "x" } }] }),
      "parts[0].file_data",
    ],
    [
      "a second generation config",
      (b: Body) => void (b.generation_config = { candidate_count: 8 }),
      "generation_config",
    ],
    ["a server tool", addTool({ google_search: {} }), "google_search"],
  ])("%s under its snake_case name", (_name, change, field) => {
    expect(refusal(API, change)).toMatch(new RegExp(`"[^"]*${field.replace(/[.[\]]/g, "\\$&")}" in snake_case`));
    // Not a server feature a policy may allow: the name is what is refused.
    expect(
      refusal(API, change, {
        policy: {
          allowServerTools: [
            "cachedContent",
            "fileData",
            "googleSearch",
            "google_search",
            "cached_content",
            "file_data",
          ],
        },
      }),
    ).toMatch(/snake_case/);
  });

  it("keys of arguments, tool results and JSON Schemas are the caller's data: snake_case there passes", () => {
    expect(
      refusal(API, (b) => {
        const declaration = ((b.tools as Body[])[0]!.functionDeclarations as Body[])[0]!;
        declaration.parametersJsonSchema = {
          type: "object",
          properties: { file_path: { type: "string" } },
          required: ["file_path"],
        };
        (b.contents as Body[]).push(
          { role: "model", parts: [{ functionCall: { name: "read", args: { file_path: "a_b.txt" } } }] },
          { role: "user", parts: [{ functionResponse: { name: "read", response: { output: { line_count: 3 } } } }] },
        );
      }),
    ).toBeUndefined();
  });
});

describe("mistral-conversations refusals", () => {
  const API = "mistral-conversations";

  it("documents and images by URL, hosted tools", () => {
    const user = (part: Body) => (b: Body) => void messages(b).push({ role: "user", content: [part] });
    expect(refusal(API, user({ type: "document_url", document_url: "https://attacker.example/a.pdf" }))).toMatch(
      /"document_url"/,
    );
    expect(refusal(API, user({ type: "image_url", image_url: "https://attacker.example/a.png" }))).toMatch(
      /fetch from a URL/,
    );
    expect(refusal(API, user({ type: "image_url", image_url: "data:image/png;base64,AAAA" }))).toBeUndefined();
    expect(refusal(API, addTool({ type: "web_search" }))).toMatch(/"web_search"/);
  });
});
