'use strict';
// JavaScript values that C holds (functions as host functions, typed
// arrays as tensor objects over their memory) and this thread's state in
// the package's C helper (src/pfnode.c), which C threads call JavaScript
// through. The trampoline itself, which runs a held function for C, is
// callbacks.js. Private.

const net = require('node:net');
const { koffi, api, helperApi, JsCall, JsRelease, scratch } = require('./library.js');
const { checkCall } = require('./errors.js');
const { readPtr } = require('./words.js');
const { lifetime } = require('./wrappers.js');

// JavaScript values that C holds, by key: functions (host functions) and
// typed arrays (tensor objects over their memory). C's finalizer hands the
// key back (jsRelease), once: a key is a slot's index + 1, and a slot
// handed back is reused (cheaper than a Map's inserts and deletes).
const heldValues = [];
const freeKeys = [];
let heldSize = 0;

function keep(value) {
  const key = freeKeys.length !== 0 ? freeKeys.pop() : heldValues.push(undefined);
  heldValues[key - 1] = value;
  heldSize++;
  return key;
}

// The value that C holds under `key` (undefined once handed back).
function heldValue(key) { return heldValues[key - 1]; }

function jsRelease(key) {
  const k = Number(key);
  if (heldValues[k - 1] === undefined) return;
  heldValues[k - 1] = undefined;
  freeKeys.push(k);
  heldSize--;
}

// The trampoline that C's calls of held functions reach (callbacks.js sets
// it: it needs the encoding and decoding that need this file).
const trampoline = { jsCall: null };

// This evaluation's gate (closed when its thread exits) and its state in
// the C helper, its env: C reaches the JavaScript functions made here on
// this thread, through this evaluation's trampolines (see src/pfnode.c).
checkCall(api.PFHostGateCreate(scratch.addr));
const GATE = readPtr(scratch, 0);
const jsCallPtr = koffi.register((index) => trampoline.jsCall(index), koffi.pointer(JsCall));
const jsReleasePtr = koffi.register(jsRelease, koffi.pointer(JsRelease));
const ENV = helperApi.init(jsCallPtr, jsReleasePtr, GATE);
if (!ENV) throw new Error('packedfunc: the C helper cannot start (no memory, or its wake pipe failed)');

// A new host function (an owned reference) that calls fn; with a context,
// released after the call (C keeps its own reference if it keeps it).
function hostFunction(fn, ctx) {
  const key = keep(fn);
  checkCall(helperApi.funcCreate(ENV, key, scratch.addr)); // on failure the key was handed back
  const h = readPtr(scratch, 0);
  if (ctx) ctx.release.push(h);
  return h;
}

// The address of the counters this thread shares with the helper
// (pfnode_shared), which the helper's pfnode_call keeps: every call frame
// has it (frames.js).
const SHARED_ADDR = helperApi.shared(ENV);

// Other threads' calls wake the event loop through the helper's wake pipe,
// read by a socket of Node.js's own (which owns the descriptor): Node.js
// closes it when this thread ends, even when a worker thread is terminated
// and no JavaScript runs at its end, where a handle of koffi's would be
// closed after koffi is gone. It does not keep the process alive: C
// threads that call JavaScript need the program to be running.
const wakeSocket = new net.Socket({ fd: helperApi.wakeFd(ENV), readable: true, writable: false });
wakeSocket.on('data', () => helperApi.serve(ENV));
wakeSocket.on('error', () => {}); // the calls that wait then time out with their own message
wakeSocket.unref();

// When this thread exits (the process, or a worker thread: 'exit' is its
// own), the JavaScript functions made here stop being callable from C: a C
// thread that calls one afterwards gets a RuntimeError with this message,
// instead of entering a JavaScript engine that is going away. A worker
// that is terminated has no 'exit' event: the helper does the same when
// its thread ends.
const EXIT_MESSAGE = 'the Node.js event loop has exited';
process.on('exit', () => {
  lifetime.shuttingDown = true;
  try {
    wakeSocket.destroy();
    helperApi.shutdown(ENV, EXIT_MESSAGE);
    api.PFHostGateClose(GATE, EXIT_MESSAGE, 1000);
  } catch { /* nothing more can be done at exit */ }
});

// How long a C thread that calls a JavaScript function waits while the
// JavaScript thread is blocked in one synchronous call into C (so that its
// event loop cannot run the function) before it fails; -1: forever.
function setThreadCallTimeout(ms) {
  if (!Number.isInteger(ms) || ms < -1 || ms > 2 ** 31 - 1) throw new RangeError('setThreadCallTimeout: expected an integer >= -1');
  return helperApi.setTimeout(ENV, ms);
}

// How many JavaScript values C holds now (functions and typed arrays).
function heldCount() { return heldSize; }

module.exports = {
  heldValue, keep, heldCount, trampoline, ENV, SHARED_ADDR, hostFunction, setThreadCallTimeout,
};
