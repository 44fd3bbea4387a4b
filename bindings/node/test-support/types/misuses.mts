// Misuses that the declarations must refuse: tsc fails if a line marked as
// an expected error type-checks (test/types.test.mjs runs tsc over it).
import pf, { DataType, List } from 'packedfunc';

// @ts-expect-error a name is a string
pf.getGlobalFunc(42);
// @ts-expect-error registerFunc takes a function
pf.registerFunc('example.bad', 3);
// @ts-expect-error the options are an object
pf.registerFunc('example.bad', () => 1, true);
// @ts-expect-error a symbol does not cross to C
pf.convert(Symbol('s'));
// @ts-expect-error a DataType is made from a string, another DataType or numbers
new DataType({ code: 2 });
// @ts-expect-error List.of takes an iterable
List.of(5);
// @ts-expect-error a loaded module's path is read-only
pf.loadModule('x.so').path = 'y.so';
// @ts-expect-error the thread-call timeout is in milliseconds, a number
pf.setThreadCallTimeout('1s');
