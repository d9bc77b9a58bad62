#!/usr/bin/env node
// Offline validation of rendered Kubernetes manifests (multi-document YAML).
//
//   node validate.mjs [FILE]        reads FILE, or stdin when FILE is absent or "-"
//
// For every object:
//   (a) schema: apiVersion + kind pick the kubernetes-models class
//       (apps/v1 StatefulSet -> kubernetes-models/apps/v1/StatefulSet, core v1 Service ->
//       kubernetes-models/v1/Service) and `new Cls(obj).validate()` checks it against the
//       OpenAPI schema (types, enums, required fields, formats); a kind without a class is an
//       error that names it;
//   (b) unknown fields, which (a) lets through: the object is walked along the TypeScript
//       declarations kubernetes-models ships (<Kind>.d.ts: `export interface I<Kind> {...}`
//       whose fields are primitives, imported interfaces, Array<T>, { [key: string]: T; },
//       inline object types and unions) and every key that is not declared is reported with
//       its full path. IntOrString, Quantity, RawExtension and JSON fields (and any other
//       type declared with no fields) are leaves: their contents are not walked.
//
// Exit status 0 and one line `validated N objects` when every object passes; 1 and one line
// per problem (on stderr) otherwise; 2 for a usage error.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";

const HERE = path.dirname(fileURLToPath(import.meta.url));

// Types whose values are opaque to the walk (their declared shape is a union of primitives or
// an empty interface standing for arbitrary JSON).
const LEAF_MODULES = new Set(["IntOrString", "Quantity", "RawExtension", "JSON", "FieldsV1"]);

// ---------------------------------------------------------------------------------------------
// A small reader for the declaration files: tokens, then the import table, the interfaces and
// the type aliases of a module.

function tokenize(text, file) {
  const tokens = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    if (/\s/.test(c)) { i++; continue; }
    if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      if (end < 0) throw new Error(`${file}: unterminated comment`);
      i = end + 2;
      continue;
    }
    if (c === "/" && text[i + 1] === "/") {
      const end = text.indexOf("\n", i);
      i = end < 0 ? n : end + 1;
      continue;
    }
    if (c === '"' || c === "'") {
      let j = i + 1;
      let value = "";
      while (j < n && text[j] !== c) {
        if (text[j] === "\\") { value += text[j + 1]; j += 2; } else { value += text[j]; j++; }
      }
      if (j >= n) throw new Error(`${file}: unterminated string`);
      tokens.push({ t: "str", v: value });
      i = j + 1;
      continue;
    }
    const id = /^[A-Za-z_$][\w$]*/.exec(text.slice(i, i + 256));
    if (id) { tokens.push({ t: "id", v: id[0] }); i += id[0].length; continue; }
    const num = /^[0-9][0-9.eE+_xXa-fA-F]*/.exec(text.slice(i, i + 64));
    if (num) { tokens.push({ t: "num", v: num[0] }); i += num[0].length; continue; }
    tokens.push({ t: "p", v: c });
    i++;
  }
  return tokens;
}

class Parser {
  constructor(tokens, file) {
    this.toks = tokens;
    this.pos = 0;
    this.file = file;
  }
  peek(k = 0) { return this.toks[this.pos + k]; }
  next() { return this.toks[this.pos++]; }
  is(v, k = 0) { const t = this.peek(k); return t !== undefined && (t.t === "p" || t.t === "id") && t.v === v; }
  expect(v) {
    const t = this.next();
    if (!t || t.v !== v) this.fail(`expected '${v}', found '${t ? t.v : "end of file"}'`);
    return t;
  }
  fail(message) { throw new Error(`${this.file}: cannot read declaration: ${message}`); }
  // Skips a statement: up to the next ';' at depth 0, or a balanced { } block.
  skipStatement() {
    let depth = 0;
    while (this.pos < this.toks.length) {
      const t = this.next();
      if (t.t === "p" && (t.v === "{" || t.v === "(" || t.v === "[")) depth++;
      else if (t.t === "p" && (t.v === "}" || t.v === ")" || t.v === "]")) {
        depth--;
        if (depth === 0 && t.v === "}") {
          if (this.is(";")) this.next();
          return;
        }
      } else if (t.t === "p" && t.v === ";" && depth === 0) return;
    }
  }
  // Skips a balanced <...> list (generic parameters or arguments).
  skipAngles() {
    let depth = 0;
    do {
      const t = this.next();
      if (!t) this.fail("unterminated '<'");
      if (t.v === "<") depth++;
      else if (t.v === ">") depth--;
    } while (depth > 0);
  }

  type() {
    if (this.is("|")) this.next();
    const members = [this.postfix()];
    while (this.is("|")) { this.next(); members.push(this.postfix()); }
    if (this.is("&")) this.fail("intersection types are not supported");
    return members.length === 1 ? members[0] : { k: "union", of: members };
  }
  postfix() {
    let node = this.primary();
    while (this.is("[") && this.is("]", 1)) { this.next(); this.next(); node = { k: "array", of: node }; }
    return node;
  }
  primary() {
    const t = this.next();
    if (!t) this.fail("unexpected end of file in a type");
    if (t.t === "str") return { k: "lit", v: t.v };
    if (t.t === "num") return { k: "lit", v: Number(t.v) };
    if (t.t === "p" && t.v === "-" && this.peek()?.t === "num") return { k: "lit", v: -Number(this.next().v) };
    if (t.t === "p" && t.v === "{") return this.members();
    if (t.t === "p" && t.v === "(") { const inner = this.type(); this.expect(")"); return inner; }
    if (t.t !== "id") this.fail(`unexpected '${t.v}' in a type`);
    switch (t.v) {
      case "string": case "number": case "boolean": case "bigint":
      case "null": case "undefined": case "true": case "false": case "never":
        return { k: "prim", name: t.v };
      case "any": case "unknown": case "object":
        return { k: "any" };
      case "Array": case "ReadonlyArray": {
        this.expect("<");
        const of = this.type();
        this.expect(">");
        return { k: "array", of };
      }
      case "Record": {
        this.expect("<");
        this.type();
        this.expect(",");
        const of = this.type();
        this.expect(">");
        return { k: "map", of };
      }
      default: {
        let name = t.v;
        while (this.is(".") && this.peek(1)?.t === "id") { this.next(); name += "." + this.next().v; }
        if (this.is("<")) this.skipAngles();
        // Indexed access (IStatefulSet["kind"]): only in class bodies, which are not walked.
        if (this.is("[") && this.peek(1)?.t === "str") { this.next(); this.next(); this.expect("]"); return { k: "any" }; }
        return { k: "ref", name };
      }
    }
  }
  // After '{': fields and index signatures up to the matching '}'.
  members() {
    const fields = new Map();
    let index = null;
    while (!this.is("}")) {
      if (this.pos >= this.toks.length) this.fail("unterminated '{'");
      if (this.is("readonly") && (this.peek(1)?.t === "str" || this.peek(1)?.t === "id" || this.is("[", 1))) this.next();
      if (this.is("[")) {
        this.next();
        this.next(); // key name
        this.expect(":");
        this.type();
        this.expect("]");
        this.expect(":");
        index = this.type();
      } else {
        const key = this.next();
        if (key.t !== "str" && key.t !== "id") this.fail(`unexpected '${key.v}' in an object type`);
        if (this.is("?")) this.next();
        if (this.is("(") || this.is("<")) { this.skipStatement(); continue; } // a method
        this.expect(":");
        fields.set(key.v, this.type());
      }
      if (this.is(";") || this.is(",")) this.next();
    }
    this.expect("}");
    return { k: "obj", fields, index };
  }

  // The module: its imports, interfaces and type aliases.
  module() {
    const imports = new Map();
    const decls = new Map();
    const aliases = new Map(); // export type { IStatefulSet as IIoK8sApiAppsV1StatefulSet }
    let primary = null;
    let firstAlias = null;
    while (this.pos < this.toks.length) {
      if (this.is("import")) {
        this.next();
        if (this.is("type")) this.next();
        if (!this.is("{")) { this.skipStatement(); continue; }
        this.next();
        const names = [];
        while (!this.is("}")) {
          if (this.is("type")) this.next();
          const imported = this.next().v;
          let local = imported;
          if (this.is("as")) { this.next(); local = this.next().v; }
          names.push([local, imported]);
          if (this.is(",")) this.next();
        }
        this.next();
        this.expect("from");
        const spec = this.next();
        if (spec.t !== "str") this.fail("expected a module name after 'from'");
        for (const [local, imported] of names) imports.set(local, { spec: spec.v, name: imported });
        if (this.is(";")) this.next();
        continue;
      }
      if (this.is("export") && this.is("interface", 1)) {
        this.next(); this.next();
        const name = this.next().v;
        if (this.is("<")) this.skipAngles();
        const bases = [];
        if (this.is("extends")) {
          this.next();
          do {
            if (this.is(",")) this.next();
            bases.push(this.next().v);
            if (this.is("<")) this.skipAngles();
          } while (this.is(","));
        }
        this.expect("{");
        const node = this.members();
        node.bases = bases;
        decls.set(name, node);
        if (!primary) primary = name;
        continue;
      }
      if (this.is("export") && (this.is("{", 1) || (this.is("type", 1) && this.is("{", 2)))) {
        this.next();
        if (this.is("type")) this.next();
        this.next();
        while (!this.is("}")) {
          if (this.is("type")) this.next();
          const local = this.next().v;
          let exported = local;
          if (this.is("as")) { this.next(); exported = this.next().v; }
          aliases.set(exported, local);
          if (this.is(",")) this.next();
        }
        this.next();
        if (this.is("from")) { this.next(); this.next(); } // a re-export: nothing declared here
        if (this.is(";")) this.next();
        continue;
      }
      if (this.is("export") && this.is("type", 1) && this.peek(2)?.t === "id") {
        this.next(); this.next();
        const name = this.next().v;
        if (this.is("<")) this.skipAngles();
        this.expect("=");
        decls.set(name, this.type());
        if (!firstAlias) firstAlias = name;
        if (this.is(";")) this.next();
        continue;
      }
      this.skipStatement();
    }
    return { imports, decls, aliases, primary: primary ?? firstAlias };
  }
}

// Module path of an import, from the importing declaration file: relative paths and package
// subpaths (through the package's "exports" map, "types" condition) to a .d.ts file.
function resolveDeclarationFile(spec, fromFile) {
  if (spec.startsWith(".")) {
    return path.resolve(path.dirname(fromFile), spec).replace(/\.js$/, "") + ".d.ts";
  }
  const parts = spec.split("/");
  const pkgName = spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
  const subpath = "." + spec.slice(pkgName.length);
  for (let dir = path.dirname(fromFile); ; dir = path.dirname(dir)) {
    const pkgDir = path.join(dir, "node_modules", pkgName);
    if (fs.existsSync(path.join(pkgDir, "package.json"))) {
      const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8"));
      const target = matchExports(pkg.exports, subpath);
      if (target) return path.join(pkgDir, target);
      return path.join(pkgDir, subpath + ".d.ts");
    }
    if (path.dirname(dir) === dir) throw new Error(`cannot find package ${pkgName} (from ${fromFile})`);
  }
}

function matchExports(exportsMap, subpath) {
  if (!exportsMap || typeof exportsMap !== "object") return null;
  const typesOf = (entry) => (typeof entry === "string" ? entry : entry?.types ?? null);
  if (subpath in exportsMap) return typesOf(exportsMap[subpath]);
  for (const [key, entry] of Object.entries(exportsMap)) {
    const star = key.indexOf("*");
    if (star < 0) continue;
    const prefix = key.slice(0, star), suffix = key.slice(star + 1);
    if (subpath.startsWith(prefix) && subpath.endsWith(suffix) && subpath.length >= key.length - 1) {
      const middle = subpath.slice(prefix.length, subpath.length - suffix.length);
      const target = typesOf(entry);
      return target ? target.replaceAll("*", middle) : null;
    }
  }
  return null;
}

const moduleCache = new Map();
function loadModule(file) {
  let mod = moduleCache.get(file);
  if (!mod) {
    if (!fs.existsSync(file)) throw new Error(`declaration file not found: ${file}`);
    const parsed = new Parser(tokenize(fs.readFileSync(file, "utf8"), file), file).module();
    mod = { file, ...parsed, leaf: LEAF_MODULES.has(path.basename(file, ".d.ts")) };
    moduleCache.set(file, mod);
  }
  return mod;
}

// Follows a reference to the declaration it names: { node, mod } or { leaf: true }.
function deref(name, mod) {
  for (let hops = 0; hops < 32; hops++) {
    if (mod.decls.has(name)) {
      const node = mod.decls.get(name);
      if (mod.leaf) return { leaf: true };
      if (node.k === "ref") { name = node.name; continue; }
      return { node, mod };
    }
    const imported = mod.imports.get(name);
    if (imported) {
      const target = loadModule(resolveDeclarationFile(imported.spec, mod.file));
      if (target.leaf) return { leaf: true };
      // Generated modules export their interface under a long alias too
      // (IStatefulSetSpec as IIoK8sApiAppsV1StatefulSetSpec).
      const declName = target.decls.has(imported.name) ? imported.name : target.aliases.get(imported.name);
      if (!declName || !target.decls.has(declName)) {
        throw new Error(`${target.file}: '${imported.name}' is not declared there (imported by ${mod.file})`);
      }
      name = declName;
      mod = target;
      continue;
    }
    throw new Error(`${mod.file}: cannot resolve type '${name}'`);
  }
  throw new Error(`${mod.file}: type alias loop at '${name}'`);
}

// An interface's fields, those of the interfaces it extends included.
function fieldsOf(node, mod) {
  if (!node.bases || node.bases.length === 0) return node.fields;
  const fields = new Map();
  for (const base of node.bases) {
    // TypeMeta (apiVersion, kind) comes from @kubernetes-models/base; every kind's interface
    // declares both fields itself as well.
    if (base === "TypeMeta") {
      fields.set("apiVersion", { k: "prim", name: "string" });
      fields.set("kind", { k: "prim", name: "string" });
      continue;
    }
    const resolved = deref(base, mod);
    if (resolved.node?.k === "obj") for (const [k, v] of fieldsOf(resolved.node, resolved.mod)) fields.set(k, v);
  }
  for (const [k, v] of node.fields) fields.set(k, v);
  return fields;
}

// ---------------------------------------------------------------------------------------------
// The walk: every key of the value must be declared by its type.

const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const keyPath = (base, key) =>
  /^[A-Za-z_$][\w$-]*$/.test(key) ? (base ? `${base}.${key}` : key) : `${base}[${JSON.stringify(key)}]`;

function walk(value, node, mod, where, problems) {
  if (node.k === "ref") {
    const resolved = deref(node.name, mod);
    if (resolved.leaf) return;
    return walk(value, resolved.node, resolved.mod, where, problems);
  }
  switch (node.k) {
    case "prim": case "lit": case "any":
      return; // types and values are the schema check's business
    case "array":
      if (Array.isArray(value)) value.forEach((item, i) => walk(item, node.of, mod, `${where}[${i}]`, problems));
      return;
    case "map":
      if (isPlainObject(value)) for (const [k, v] of Object.entries(value)) walk(v, node.of, mod, keyPath(where, k), problems);
      return;
    case "obj": {
      if (!isPlainObject(value)) return;
      const fields = fieldsOf(node, mod);
      if (fields.size === 0 && !node.index) return; // declared without fields: free-form JSON
      for (const [k, v] of Object.entries(value)) {
        const field = fields.get(k);
        if (field) walk(v, field, mod, keyPath(where, k), problems);
        else if (node.index) walk(v, node.index, mod, keyPath(where, k), problems);
        else problems.push(`${keyPath(where, k)} is not a field`);
      }
      return;
    }
    case "union": {
      // The members that could describe this value's shape; the first that accepts it wins.
      const shaped = [];
      for (const member of node.of) {
        let m = member, mm = mod;
        if (m.k === "ref") {
          const resolved = deref(m.name, mm);
          if (resolved.leaf) return;
          m = resolved.node; mm = resolved.mod;
        }
        if (m.k === "any") return;
        if (Array.isArray(value) ? m.k === "array" : isPlainObject(value) && (m.k === "obj" || m.k === "map" || m.k === "union")) {
          shaped.push([m, mm]);
        }
      }
      let first = null;
      for (const [m, mm] of shaped) {
        const found = [];
        walk(value, m, mm, where, found);
        if (found.length === 0) return;
        first ??= found;
      }
      if (first) problems.push(...first);
      return;
    }
    default:
      throw new Error(`internal: unknown type node '${node.k}'`);
  }
}

// ---------------------------------------------------------------------------------------------
// Objects.

function pointerToPath(pointer) {
  let out = "";
  for (const raw of pointer.split("/").slice(1)) {
    const seg = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    out = /^[0-9]+$/.test(seg) ? `${out}[${seg}]` : keyPath(out, seg);
  }
  return out;
}

async function validateObject(obj, label, problems) {
  if (!isPlainObject(obj) || typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
    problems.push(`${label}: not a Kubernetes object (apiVersion and kind are required)`);
    return;
  }
  const name = isPlainObject(obj.metadata) && typeof obj.metadata.name === "string" ? obj.metadata.name : label;
  const id = `${obj.kind} ${name}`;
  const unsupported = () => problems.push(`${id}: unsupported kind '${obj.kind}' of apiVersion '${obj.apiVersion}' (no kubernetes-models class)`);

  const m = /^(?:([a-z0-9][a-z0-9.-]*)\/)?(v[0-9]+(?:(?:alpha|beta)[0-9]+)?)$/.exec(obj.apiVersion);
  if (!m || !/^[A-Z][A-Za-z0-9]*$/.test(obj.kind)) return unsupported();
  const spec = `kubernetes-models/${m[1] ? m[1] + "/" : ""}${m[2]}/${obj.kind}`;
  let Cls;
  try {
    Cls = (await import(spec))[obj.kind];
  } catch (err) {
    if (err?.code === "ERR_PACKAGE_PATH_NOT_EXPORTED" || err?.code === "ERR_MODULE_NOT_FOUND") return unsupported();
    throw err;
  }
  // Only top-level kinds carry apiVersion and kind (kubernetes-models/v1/PodSpec does not).
  if (typeof Cls !== "function" || Cls.kind !== obj.kind || Cls.apiVersion !== obj.apiVersion) return unsupported();

  // (a) the schema
  try {
    new Cls(obj).validate();
  } catch (err) {
    if (Array.isArray(err?.errors) && err.errors.length > 0) {
      for (const e of err.errors) problems.push(`${id}: ${pointerToPath(e.instancePath ?? "") || "(object)"} ${e.message}`);
    } else {
      problems.push(`${id}: ${err?.message ?? err}`);
    }
  }

  // (b) unknown fields, along <Kind>.d.ts
  const jsFile = fileURLToPath(import.meta.resolve(spec));
  const mod = loadModule(jsFile.replace(/\.js$/, ".d.ts"));
  if (!mod.primary) throw new Error(`${mod.file}: no interface declared`);
  const found = [];
  walk(obj, { k: "ref", name: mod.primary }, mod, "", found);
  for (const f of found) problems.push(`${id}: ${f}`);
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length > 1 || args[0] === "-h" || args[0] === "--help") {
    console.error("usage: node validate.mjs [FILE|-]   (multi-document YAML; stdin by default)");
    process.exit(2);
  }
  let text;
  try {
    text = args.length === 0 || args[0] === "-" ? fs.readFileSync(0, "utf8") : fs.readFileSync(args[0], "utf8");
  } catch (err) {
    console.error(`validate: cannot read ${args[0] ?? "stdin"}: ${err.message}`);
    process.exit(2);
  }

  const problems = [];
  let documents = [];
  try {
    documents = yaml.loadAll(text);
  } catch (err) {
    problems.push(`YAML: ${err.message.split("\n")[0]}`);
  }
  const objects = [];
  documents.forEach((doc, i) => {
    if (doc === null || doc === undefined) return; // empty document between separators
    if (isPlainObject(doc) && doc.kind === "List" && Array.isArray(doc.items)) {
      doc.items.forEach((item, j) => objects.push([item, `document ${i + 1} item ${j + 1}`]));
    } else {
      objects.push([doc, `document ${i + 1}`]);
    }
  });
  if (objects.length === 0 && problems.length === 0) problems.push("no objects in the input");

  for (const [obj, label] of objects) {
    try {
      await validateObject(obj, label, problems);
    } catch (err) {
      problems.push(`${label}: validator error: ${err.message}`);
    }
  }

  if (problems.length > 0) {
    for (const p of problems) console.error(p);
    process.exit(1);
  }
  console.log(`validated ${objects.length} objects`);
}

await main();
