'use strict';
// What console.log and util.inspect show of a wrapper: its kind, then its
// items or fields as Node.js shows an array's, a Map's or an object's,
// nested values one level deeper, and long sequences cut at
// options.maxArrayLength with Node's own "... n more items". Each wrapper's
// file installs these as its [util.inspect.custom]. Private.

const { inspect } = require('node:util');

// The options for a value nested one level deeper.
function deeper(options) {
  return { ...options, depth: options.depth === null ? null : options.depth - 1 };
}

// How many of n items to show under options.maxArrayLength.
function shown(n, options) {
  const max = options.maxArrayLength;
  return max === null || max === undefined || max === Infinity ? n : Math.min(n, Math.max(0, max));
}

function more(k) { return `... ${k} more item${k === 1 ? '' : 's'}`; }

// Shows itself as its text, unquoted (why a field cannot be read).
class Text {
  constructor(text) { this.text = text; }

  [inspect.custom]() { return this.text; }
}

// `label(n) [ ... ]`: n items, of which first(k) gives the first k.
function inspectSequence(label, n, first, depth, options) {
  if (depth < 0) return options.stylize(`[${label}]`, 'special');
  const k = shown(n, options);
  // An array of n whose first k items are set (and the next, which Node.js
  // looks at to align numbers): Node.js shows k and counts the rest, as it
  // does for its own arrays.
  const items = new Array(Math.min(n, 2 ** 32 - 1));
  first(Math.min(n, k + 1)).forEach((x, i) => { items[i] = x; });
  return `${label}(${n}) ${inspect(items, { ...deeper(options), maxArrayLength: k })}`;
}

// `label(n) { key => value, ... }`: n entries, of which first(k) gives the
// first k as [key, value] pairs.
function inspectMapping(label, n, first, depth, options) {
  if (depth < 0) return options.stylize(`[${label}]`, 'special');
  const k = shown(n, options);
  let text = inspect(new Map(first(k)), { ...deeper(options), maxArrayLength: Infinity }).replace(/^Map\(\d+\) /, '');
  if (k < n) {
    text = k === 0 ? `{ ${more(n)} }`
      : text.replace(/(\s*)\}$/, (_, space) => `,${space.includes('\n') ? '\n  ' : ' '}${more(n - k)}${space}}`);
  }
  return `${label}(${n}) ${text}`;
}

// `label { name: value, ... }`: the values of obj's properties `names`; one
// that cannot be read now shows why.
function inspectFields(label, obj, names, depth, options) {
  if (depth < 0) return options.stylize(`[${label}]`, 'special');
  const fields = {};
  for (const name of names) {
    let value;
    try {
      value = obj[name];
    } catch (err) {
      value = new Text(`<${err && err.message}>`);
    }
    Object.defineProperty(fields, name, { value, enumerable: true });
  }
  return `${label} ${inspect(fields, deeper(options))}`;
}

// The method by which a PackedObject subclass shows its items or fields.
const kInspect = Symbol('packedfunc.inspect');

module.exports = { inspectSequence, inspectMapping, inspectFields, kInspect, custom: inspect.custom };
