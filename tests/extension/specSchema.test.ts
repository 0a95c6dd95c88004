// The hints-only spec schema (extension/src/specSchemaHints.ts): fed the real schema, nothing in it can
// fail a document (checked with a JSON Schema validator on spec documents the full schema rejects, and by
// looking for validation keywords), while titles, descriptions, defaults and enum values stay.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import Ajv2020 from "ajv/dist/2020";

import { type JsonObject, type JsonValue, hintsOnlySchema } from "../../extension/src/specSchemaHints";

const SCHEMA_FILE = join(__dirname, "..", "..", "..", "extension", "schemas", "distspec.schema.json");

function fullSchema(): JsonObject {
  return JSON.parse(readFileSync(SCHEMA_FILE, "utf8")) as JsonObject;
}

/** A validator that knows VS Code's own keywords (`markdownDescription`, `defaultSnippets`, ...) as annotations. */
function validator(schema: JsonValue): (doc: unknown) => boolean {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  const check = ajv.compile(schema as object);
  return (doc) => check(doc);
}

const base = { format: "distcheck-spec", version: 1 };

/** Spec documents with mistakes of every kind the full schema catches (each one is checked to be rejected). */
const INVALID_SPECS: Record<string, unknown> = {
  "unknown field and a string for a boolean": { ...base, system_reductions: "yes", not_a_field: 1 },
  "wrong format constant and a string version": { format: "distcheck", version: "1" },
  "version out of the one allowed value": { ...base, version: 2 },
  "policy: enum value, exclusive minimum, unknown key": {
    ...base,
    distribution: { policy: { kind: "sharded", halo_width: -1, halo: 3 } },
  },
  "policy: null where an object goes": { ...base, distribution: { policy: null } },
  "custom op: bad op pattern, index-named transforms, enum values, missing op": {
    ...base,
    distribution: {
      custom_ops: [
        { op: "not an op", arg_transforms: { x: "gather_inputs", "0": "bogus" }, output_transforms: { "01": "none" } },
        { arg_transforms: {} },
      ],
    },
  },
  "helper: python kind without replacement, with atom_arg (if/then/not)": {
    ...base,
    distribution: { third_party_helpers: [{ kind: "python", module: "pkg.mod", attr_name: "f", atom_arg: 1 }] },
  },
  "helper: method kind with a plain attr_name, unknown key": {
    ...base,
    distribution: { third_party_helpers: [{ kind: "method", module: "pkg.mod", attr_name: "f", extra: true }] },
  },
  "output kinds: empty name, unknown kind; outputs repeated and empty": {
    ...base,
    output_kinds: { "": "per_node", energy: "per_atom" },
    all_reduce_outputs: ["energy", "energy", ""],
    owned_only_outputs: [3],
  },
  "distribution: unknown key": { ...base, distribution: { policies: {} } },
  "not an object: array": [],
  "not an object: string": "spec",
  "not an object: number": 3,
  "not an object: null": null,
};

/** Keywords that can make a document invalid (JSON Schema 2020-12 and earlier drafts, and VS Code's own). */
const VALIDATION_KEYWORDS = [
  "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
  "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains",
  "minContains", "contains", "maxProperties", "minProperties", "required", "dependentRequired", "dependencies",
  "dependentSchemas", "propertyNames", "not", "if", "then", "else", "oneOf", "unevaluatedItems",
  "unevaluatedProperties", "deprecationMessage", "deprecated", "errorMessage", "patternErrorMessage",
];

/** Every subschema of `schema` with its JSON path (through the applicator keywords). */
function subschemas(schema: JsonValue, at = "#"): Array<[string, JsonObject]> {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    return [];
  }
  const out: Array<[string, JsonObject]> = [[at, schema]];
  for (const [key, value] of Object.entries(schema)) {
    if (["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"].includes(key) && value && typeof value === "object" && !Array.isArray(value)) {
      for (const [name, sub] of Object.entries(value)) {
        out.push(...subschemas(sub, `${at}/${key}/${name}`));
      }
    } else if (Array.isArray(value) && ["items", "prefixItems", "allOf", "anyOf", "oneOf"].includes(key)) {
      value.forEach((sub, i) => out.push(...subschemas(sub, `${at}/${key}/${i}`)));
    } else if (["items", "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems"].includes(key)) {
      out.push(...subschemas(value, `${at}/${key}`));
    }
  }
  return out;
}

/** Where a validation keyword, or a `false` subschema, is left in `schema`. */
function validationLeft(schema: JsonValue): string[] {
  const found: string[] = [];
  for (const [at, sub] of subschemas(schema)) {
    for (const key of VALIDATION_KEYWORDS) {
      if (key in sub) {
        found.push(`${at}/${key}`);
      }
    }
    for (const key of ["items", "additionalProperties", "additionalItems", "unevaluatedProperties"]) {
      if (sub[key] === false) {
        found.push(`${at}/${key}: false`);
      }
    }
  }
  return found;
}

/** A schema with the keywords the spec schema does not use today, so a later schema cannot slip past. */
const EVERY_KEYWORD: JsonObject = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $defs: { name: { type: "string", minLength: 2, maxLength: 4, pattern: "^[a-z]+$" } },
  type: "object",
  required: ["a"],
  minProperties: 2,
  maxProperties: 3,
  dependentRequired: { a: ["b"] },
  dependentSchemas: { c: { required: ["d"] } },
  propertyNames: { maxLength: 1 },
  unevaluatedProperties: false,
  properties: {
    a: { $ref: "#/$defs/name", deprecationMessage: "do not use a", errorMessage: "bad a" },
    b: { oneOf: [{ type: "integer", multipleOf: 3 }, { type: "number", maximum: 10 }] },
    c: { type: "array", prefixItems: [{ const: 1 }], items: false, minItems: 2, maxItems: 1, contains: { const: 9 }, minContains: 2 },
    d: { not: {}, enum: [1, 2], enumDescriptions: ["one", "two"] },
    e: false,
  },
  patternProperties: { "^x": { type: "null" } },
};

const EVERY_KEYWORD_DOC = { a: "ABCDEFG", b: 3, c: [2, 3, 4], d: 5, e: 1, x1: 0, zz: true };

describe("hints-only spec schema", () => {
  it("the full schema rejects every invalid spec, and the hints-only schema accepts it", () => {
    const full = fullSchema();
    const strict = validator(full);
    const hints = validator(hintsOnlySchema(full));
    for (const [name, doc] of Object.entries(INVALID_SPECS)) {
      assert.equal(strict(doc), false, `the full schema should reject: ${name}`);
      assert.equal(hints(doc), true, `the hints-only schema must accept: ${name}`);
    }
  });

  it("leaves no validation keyword and no false subschema in the real schema", () => {
    const full = fullSchema();
    assert.ok(validationLeft(full).length > 20, "the real schema has validation keywords to remove");
    assert.deepEqual(validationLeft(hintsOnlySchema(full)), []);
  });

  it("removes every kind of validation keyword, not only those the spec schema uses today", () => {
    assert.equal(validator(EVERY_KEYWORD)(EVERY_KEYWORD_DOC), false);
    const hints = hintsOnlySchema(EVERY_KEYWORD);
    assert.deepEqual(validationLeft(hints), []);
    const accepts = validator(hints);
    for (const doc of [EVERY_KEYWORD_DOC, {}, [], "x", 0, null, { b: 3 }, { c: [] }]) {
      assert.equal(accepts(doc), true, JSON.stringify(doc));
    }
    // oneOf's branches now all match: they become anyOf, which cannot fail on "more than one"
    const b = (hints as { properties: Record<string, JsonObject> }).properties.b;
    assert.ok(b && Array.isArray(b.anyOf) && b.anyOf.length === 2 && !("oneOf" in b));
    assert.equal((hints as { $defs?: unknown }).$defs !== undefined, true, "definitions a $ref points at stay");
  });

  it("keeps every property, title, description and default, and offers enum and const values as examples", () => {
    const full = fullSchema();
    const hints = hintsOnlySchema(full);
    const hinted = new Map(subschemas(hints));
    let withEnum = 0;
    for (const [at, sub] of subschemas(full)) {
      if (/\/(if|then|else|not|propertyNames)(\/|$)/.test(at)) {
        continue; // conditions and constraints, which carry no hints
      }
      const kept = hinted.get(at.replace(/\/oneOf\//g, "/anyOf/"));
      assert.ok(kept, `${at} is kept`);
      for (const key of ["title", "description", "markdownDescription", "default"]) {
        assert.deepEqual(kept[key], sub[key], `${at}/${key}`);
      }
      if (sub.properties && typeof sub.properties === "object") {
        assert.deepEqual(Object.keys(kept.properties ?? {}), Object.keys(sub.properties), `${at}/properties`);
      }
      const suggested = Array.isArray(kept.examples) ? kept.examples : [];
      for (const value of [...(Array.isArray(sub.enum) ? sub.enum : []), ...("const" in sub ? [sub.const ?? null] : [])]) {
        withEnum += 1;
        assert.ok(suggested.some((v) => JSON.stringify(v) === JSON.stringify(value)), `${at}: ${JSON.stringify(value)} suggested`);
      }
      if (sub.type === "boolean") {
        assert.deepEqual(suggested, [true, false], `${at}: a boolean suggests true and false`);
      }
    }
    assert.ok(withEnum >= 10, "the real schema's enum values were looked at");
  });

  it("does not modify the schema it is given", () => {
    const full = fullSchema();
    const copy = structuredClone(full);
    hintsOnlySchema(full);
    hintsOnlySchema(EVERY_KEYWORD);
    assert.deepEqual(full, copy);
  });
});
