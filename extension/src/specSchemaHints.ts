/**
 * The spec schema's hints-only form, pure (no `vscode` import): what VS Code's JSON language service is
 * given while the distcheck server runs, so that it still completes and explains a spec file (property
 * names, titles, descriptions, defaults, enum values as suggestions) but reports nothing; the server's
 * `spec-invalid` diagnostics are then the only ones for a spec's mistakes (docs/diagnostics.md).
 *
 * The transform keeps an allow-list of keywords, so a keyword it does not know (a validation keyword
 * added to the schema later, VS Code's `deprecationMessage` or `errorMessage`) is dropped rather than
 * passed on: nothing in the result can fail a document.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Keywords that only describe or suggest: copied as they are. */
const ANNOTATIONS: ReadonlySet<string> = new Set([
  "$schema",
  "$id",
  "$comment",
  "title",
  "description",
  "markdownDescription",
  "default",
  "defaultSnippets",
  "doNotSuggest",
  "suggestSortText",
  "allowComments",
  "allowTrailingCommas",
]);

/** Keywords whose value maps names to subschemas. */
const SCHEMA_MAPS: ReadonlySet<string> = new Set(["properties", "patternProperties", "$defs", "definitions"]);

/** Keywords whose value is one subschema. */
const SCHEMA_SINGLE: ReadonlySet<string> = new Set(["additionalProperties", "additionalItems"]);

/**
 * Every keyword `hintsOnlySchema` can leave in a schema object (the rest are dropped). `allOf` and `anyOf`
 * hold hints-only branches, which every document matches; `oneOf` becomes `anyOf`, since several
 * branches that match everything would fail "exactly one".
 */
export const HINT_KEYWORDS: ReadonlySet<string> = new Set([
  ...ANNOTATIONS,
  ...SCHEMA_MAPS,
  ...SCHEMA_SINGLE,
  "items",
  "prefixItems",
  "allOf",
  "anyOf",
  "$ref",
  "examples",
]);

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typesOf(schema: JsonObject): string[] {
  const type = schema.type;
  if (typeof type === "string") {
    return [type];
  }
  return Array.isArray(type) ? type.filter((t): t is string => typeof t === "string") : [];
}

/** The values a user would pick from: `examples`, then `const`, `enum` and, for a boolean, true and false. */
function suggestedValues(schema: JsonObject): JsonValue[] {
  const values: JsonValue[] = [];
  const add = (value: JsonValue): void => {
    const key = JSON.stringify(value);
    if (!values.some((v) => JSON.stringify(v) === key)) {
      values.push(value);
    }
  };
  for (const value of Array.isArray(schema.examples) ? schema.examples : []) {
    add(value);
  }
  if ("const" in schema && schema.const !== undefined) {
    add(schema.const);
  }
  for (const value of Array.isArray(schema.enum) ? schema.enum : []) {
    add(value);
  }
  if (values.length === 0 && typesOf(schema).includes("boolean")) {
    add(true);
    add(false);
  }
  return values;
}

/**
 * The hints-only form of a JSON Schema: the same properties, items and definitions with their titles,
 * descriptions and defaults, `enum`/`const` values (and true/false for a boolean) as `examples`, and no
 * keyword that can make a document invalid (`type`, `enum`, `const`, `pattern`, bounds, `required`,
 * `additionalProperties: false`, `propertyNames`, `not`, `if`/`then`/`else`, `oneOf`, ... are gone). Every
 * JSON document is valid against the result. `schema` is not modified.
 */
export function hintsOnlySchema(schema: JsonValue): JsonValue {
  if (typeof schema === "boolean") {
    return true; // `false` rejects everything; `true` is already hints-only
  }
  if (!isObject(schema)) {
    return {};
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    if (ANNOTATIONS.has(key)) {
      out[key] = structuredClone(value);
    } else if (SCHEMA_MAPS.has(key) && isObject(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, hintsOnlySchema(sub)]));
    } else if (SCHEMA_SINGLE.has(key) && isObject(value)) {
      out[key] = hintsOnlySchema(value);
    } else if (key === "items" && (isObject(value) || Array.isArray(value))) {
      out[key] = Array.isArray(value) ? value.map(hintsOnlySchema) : hintsOnlySchema(value);
    } else if ((key === "prefixItems" || key === "allOf") && Array.isArray(value)) {
      out[key] = value.map(hintsOnlySchema);
    } else if ((key === "anyOf" || key === "oneOf") && Array.isArray(value)) {
      const earlier = Array.isArray(out.anyOf) ? out.anyOf : [];
      out.anyOf = [...earlier, ...value.map(hintsOnlySchema)];
    } else if (key === "$ref" && typeof value === "string" && value.startsWith("#")) {
      out[key] = value; // a reference inside this schema, whose definitions are hints-only too
    }
  }
  const values = suggestedValues(schema);
  if (values.length > 0) {
    out.examples = values;
  }
  return out;
}
