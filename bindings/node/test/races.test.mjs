// An instance that a callAsync call took, while that call runs on another
// thread: JavaScript cannot write its fields, read them through C, or pass
// it to another call (an error, at once: the event loop never waits), so C
// never reads what a write freed. (issue 30, item 4)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';

import { pf, nodetest } from '../test-support/fixtures.mjs';

for (const init of ['pfn_init_note', 'pfn_init_note_call']) {
  if (nodetest.func(`int ${init}()`)() !== 0) throw new Error(`${init} failed`);
}
const Note = pf.getObjectType('nodetest.Note');
const nt = pf.initApi('nodetest');

const IN_USE = (e) => e instanceof pf.PackedFuncError && e.kind === 'RuntimeError' &&
  /nodetest\.Note instance is in use by a callAsync call that has not ended/.test(e.message);

// Starts watch(note) off the JavaScript thread, and waits until it has read the text.
async function watching(note) {
  nt.note_go(0);
  const before = nt.note_started();
  const call = nt.note_watch.callAsync(note, 10000);
  for (let i = 0; nt.note_started() === before; i++) {
    assert.ok(i < 5000, 'watch() did not start');
    await sleep(1);
  }
  return { call }; // in an object: an async function's result adopts a Promise
}

test('a field write while a callAsync call reads the instance is refused, and C reads what it read', async () => {
  const note = new Note();
  note.text = 'a'.repeat(40);
  const { call } = await watching(note);
  try {
    assert.throws(() => { note.text = 'b'.repeat(40); }, IN_USE);
    assert.throws(() => note.text, IN_USE); // a str read goes through C
    assert.match(inspect(note), /text: <packedfunc: .*instance is in use by a callAsync call/); // console.log says why
    assert.throws(() => nt.note_watch(note, 0), IN_USE);
    await assert.rejects(nt.note_watch.callAsync(note, 0), IN_USE);
    assert.throws(() => pf.List.of([note]), IN_USE);
  } finally {
    nt.note_go(1);
  }
  assert.equal(await call, 40); // -1 (or ASan's use-after-free) before
  note.text = 'c'; // free again once the call ended
  assert.equal(note.text, 'c');
  assert.equal(nt.note_watch(note, 0), 1);
});

test('an instance disposed while a callAsync call uses it is released when the call ends', async () => {
  const note = new Note();
  note.text = 'd'.repeat(30);
  const { call } = await watching(note);
  note.dispose();
  assert.throws(() => note.text, /disposed/);
  nt.note_go(1);
  assert.equal(await call, 30);
});

test('a failed callAsync frees its instances', async () => {
  const note = new Note();
  await assert.rejects(nt.note_watch.callAsync(note, 'x'), TypeError);
  note.text = 'e';
  assert.equal(note.text, 'e');
});

test('a callback that the callAsync call waits for may use the instance the call took', async () => {
  const note = new Note();
  note.text = 'f';
  const seen = [];
  let beside;
  const n = await nt.note_call.callAsync(note, () => {
    seen.push(note.text);
    note.text = 'g'.repeat(7); // the call's thread waits for this callback
    seen.push(nt.note_watch(note, 0));
    beside = assert.rejects(nt.note_watch.callAsync(note, 0), IN_USE); // would run beside the call
    return 0;
  });
  await beside;
  assert.deepEqual(seen, ['f', 7]);
  assert.equal(n, 7);
});

test('a callback of another C thread may not use an instance that a callAsync call took', async () => {
  const note = new Note();
  note.text = 'h';
  const { call } = await watching(note);
  try {
    // call_in_threads runs the callback from its own threads, not the watching call's.
    await assert.rejects(nt.call_in_threads.callAsync(() => { note.text = 'i'; return 1; }, 1, 1), IN_USE);
  } finally {
    nt.note_go(1);
  }
  assert.equal(await call, 1);
});
