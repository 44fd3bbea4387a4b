'use strict';
// Errors: C error kinds as JavaScript error classes, and back.
//
// Every call into libpackedfunc that can fail goes through checkCall (or
// lastError), which throws the calling thread's packedfunc error as the
// class of its kind: TypeError for "TypeError", RangeError for
// "ValueError" and "IndexError" (a value outside what is allowed), a
// registered class for a registered kind, and PackedFuncError (with
// `kind`) for every other kind. Each has `kind` and `cTraceback` (the C
// traceback lines, innermost first), and the C levels as lines of its
// stack. A JavaScript exception thrown in a callback becomes the calling
// thread's packedfunc error (recordException) and comes back to the
// JavaScript caller as the same object, with the C levels it crossed in
// its stack. Everything here is private; index.js re-exports the classes
// and registerError.

const path = require('node:path');
const crypto = require('node:crypto');
const { api } = require('./library.js');

// The package's own code, whose frames a caller is not shown.
const OWN_FILES = [__dirname + path.sep, path.resolve(__dirname, '..', 'index.js'),
  path.resolve(__dirname, '..', 'index.mjs')];

class PackedFuncError extends Error {
  constructor(message, kind = 'RuntimeError') {
    super(message);
    this.kind = kind;
    this.cTraceback = [];
  }

  get name() { return this.kind; }
}

// A name that names no function: getGlobalFunc, removeGlobalFunc and a
// module's get(). Its kind is C's "KeyError".
class FunctionNotFoundError extends PackedFuncError {
  constructor(message) { super(message, 'KeyError'); }
}

const KIND_RE = /^[A-Za-z_][A-Za-z0-9_.]*$/;
const kindToClass = new Map([['TypeError', TypeError], ['ValueError', RangeError],
  ['IndexError', RangeError]]);
const classToKind = new Map([[TypeError, 'TypeError'], [RangeError, 'ValueError']]);

// Map an error kind to an error class, both ways: a C function that fails
// with `kind` throws `cls` in JavaScript, and a callback that throws `cls`
// (or a subclass) fails its C call with `kind`.
function registerError(kind, cls) {
  if (typeof kind !== 'string') throw new TypeError(`registerError: kind must be a string, not ${typeof kind}`);
  if (!KIND_RE.test(kind) || Buffer.byteLength(kind) >= 64) {
    throw new RangeError(`registerError: kind ${JSON.stringify(kind)} is not an identifier of at most 63 bytes`);
  }
  if (typeof cls !== 'function' || !(cls.prototype instanceof Error || cls === Error)) {
    throw new TypeError('registerError: cls must be a subclass of Error');
  }
  kindToClass.set(kind, cls);
  classToKind.set(cls, kind);
  return cls;
}

// The kind for a thrown value: its class's registered kind (nearest
// ancestor first), the `kind` of a packedfunc error, else "RuntimeError".
function kindOf(err) {
  if (err === null || typeof err !== 'object') return 'RuntimeError';
  // An error that came from C (or was made with a kind) keeps its kind.
  if (Object.hasOwn(err, 'kind') && typeof err.kind === 'string' && KIND_RE.test(err.kind)) return err.kind;
  for (let p = Object.getPrototypeOf(err); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    const kind = classToKind.get(p.constructor);
    if (kind !== undefined) return kind;
  }
  return 'RuntimeError';
}

// ---- stacks ---------------------------------------------------------------------

function isOwnFrame(line) {
  return OWN_FILES.some((f) => line.includes(f)) || line.includes('node_modules/koffi');
}

// The C traceback lines as stack lines, outermost first.
function cStackLines(lines) {
  return lines.slice().reverse().map((l) => `    at [C] ${l.trim()}`);
}

// `stack` with the first run of this package's frames replaced by the C
// levels and its other frames dropped.
function spliceStack(stack, cLines) {
  const lines = String(stack).split('\n');
  let head = 0;
  while (head < lines.length && !/^\s+at /.test(lines[head])) head++;
  const out = lines.slice(0, head);
  let placed = false;
  for (let i = head; i < lines.length; i++) {
    if (isOwnFrame(lines[i])) {
      if (!placed) { out.push(...cLines); placed = true; }
    } else {
      out.push(lines[i]);
    }
  }
  if (!placed) out.splice(head, 0, ...cLines);
  return out.join('\n');
}

// ---- JavaScript exceptions that cross C -----------------------------------------
//
// Kept so that the very object comes back when its error reaches JavaScript
// again, keyed by a token written into the error's traceback text (which
// travels across threads with the error). A token names this process: error
// text travels, and another process's token must never find one of these.

const saved = new Map();
const SAVED_MAX = 16;
let tokens = 0;
const tag = crypto.randomBytes(8).toString('hex');
const TOKEN_RE = /\[js exception #([0-9a-f]{16}-\d+)\]/g;

function messageOf(err) {
  if (err instanceof Error) return String(err.message);
  try { return String(err); } catch { return '<unprintable value>'; }
}

// The frames of the callback itself: the thrown value's stack lines before
// the first frame of this package.
function callbackFrames(err) {
  if (!(err instanceof Error) || typeof err.stack !== 'string') return [];
  const out = [];
  for (const line of err.stack.split('\n')) {
    if (!/^\s+at /.test(line)) continue;
    if (isOwnFrame(line)) break;
    out.push(line.trim());
  }
  return out;
}

// Record a thrown value as the calling thread's packedfunc error, for a
// callback about to fail. Never throws.
function recordException(err) {
  try {
    const kind = kindOf(err);
    const token = `${tag}-${++tokens}`;
    saved.set(token, err);
    while (saved.size > SAVED_MAX) saved.delete(saved.keys().next().value);
    api.PFErrorSet(kind, messageOf(err).replace(/\0/g, '\\x00'));
    const earlier = err instanceof Error && typeof err.cTraceback === 'object' && err.__pfCText;
    if (earlier) api.PFErrorAppendTraceback(earlier);
    const frames = callbackFrames(err).map((l) => `  ${l}`).join('\n');
    api.PFErrorAppendTraceback(`[js exception #${token}]${frames ? `\n${frames}` : ''}`);
  } catch {
    try { api.PFErrorSet('RuntimeError', 'packedfunc: a JavaScript callback failed'); } catch { /* at exit */ }
  }
  return -1;
}

function newError(kind, message) {
  const cls = kindToClass.get(kind);
  let err;
  if (cls === undefined) {
    err = new PackedFuncError(message, kind);
  } else {
    try { err = new cls(message); } catch { err = null; }
    if (!(err instanceof Error)) err = new PackedFuncError(`${kind}: ${message}`, kind);
  }
  return err;
}

// The calling thread's packedfunc error as a JavaScript error. `level`
// names the function that was called, for a C level of its own when the C
// code wrote no line for it; `note(kind, message)`, when given, says what
// to pass instead (encode.js, hintsFor), or null.
function lastError(level, note = null) {
  const kind = api.PFErrorGetKind() || 'RuntimeError';
  const message = api.PFErrorGetMessage() || '';
  const text = api.PFErrorGetTraceback() || '';
  let last = null;
  for (const m of text.matchAll(TOKEN_RE)) last = m;
  const lines = (t) => t.split('\n').filter((l) => l.trim() && !/^\s+at /.test(l));
  if (last !== null) {
    const original = saved.get(last[1]);
    saved.delete(last[1]);
    if (original !== undefined && kindOf(original) === kind) {
      // What C appended after the token are the levels it crossed.
      const after = text.slice(last.index + last[0].length).split('\n')
        .filter((l) => l.trim() && !/^ {2}at /.test(l));
      const cLines = withLevel(after, level);
      if (original instanceof Error) {
        try {
          original.stack = spliceStack(original.stack, cStackLines(cLines));
          Object.defineProperty(original, '__pfCText', { value: text, configurable: true, writable: true });
        } catch { /* a frozen error keeps its stack */ }
      }
      return original;
    }
  }
  const cLines = withLevel(lines(last === null ? text : text.slice(last.index + last[0].length)), level);
  const extra = note === null ? null : note(kind, message);
  const err = newError(kind, extra === null ? message : `${message} (${extra})`);
  try {
    err.kind = kind;
    err.cTraceback = text.split('\n').filter((l) => l.trim());
    const here = {};
    Error.captureStackTrace(here, lastError);
    const header = `${err.name}: ${err.message}`;
    err.stack = spliceStack(`${header}\n${here.stack.split('\n').slice(1).join('\n')}`, cStackLines(cLines));
    Object.defineProperty(err, '__pfCText', { value: text, configurable: true, writable: true });
  } catch { /* keep what there is */ }
  return err;
}

// The C lines, with one for the called function when none names it.
function withLevel(cLines, level) {
  if (!level) return cLines;
  const named = cLines.some((l) => l.includes(level));
  return named ? cLines : cLines.concat([`in ${level}`]);
}

function checkCall(rc, level) {
  if (rc !== 0) throw lastError(level);
  return rc;
}

// A name (of a function, a type, a key, a prefix) that goes to C as a
// NUL-terminated UTF-8 string: a NUL would cut it, so it is refused, as is
// a lone surrogate, which UTF-8 cannot encode.
function nameArg(where, name, what = 'name') {
  if (typeof name !== 'string') throw new TypeError(`${where}: ${what} must be a string, not ${typeof name}`);
  if (name.includes('\0')) throw new RangeError(`${where}: ${what} '${name.slice(0, 60)}' contains a NUL character`);
  if (!name.isWellFormed()) throw new RangeError(`${where}: ${what} contains a lone surrogate, which UTF-8 cannot encode`);
  return name;
}

module.exports = {
  PackedFuncError, FunctionNotFoundError, registerError, recordException, lastError, checkCall,
  kindOf, spliceStack, isOwnFrame, nameArg,
};
