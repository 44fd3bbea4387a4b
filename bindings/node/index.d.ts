// Type declarations of packedfunc for Node.js (index.js, index.mjs).
//
// They describe the CommonJS module (index.js): `require('packedfunc')` and
// `import pf = require('packedfunc')` give its object, which has no
// `default`. TypeScript models `import pf from 'packedfunc'` from an ES
// module (under module NodeNext, or with esModuleInterop) as that same
// object, which is what index.mjs's default export is; the named imports
// are its properties.

/** A value that crosses to C. */
export type Value =
  | number | bigint | boolean | string | null | undefined
  | Uint8Array | ArrayBufferView | TensorArg
  | DataType | Device | OpaqueHandle
  | PackedFunction | ((...args: any[]) => any)
  | PackedObject | Value[] | Map<string | number | bigint, Value> | { [key: string]: Value };

/**
 * A packed function whose parameters and result are known: A, the
 * parameters as a tuple, R the result (the declarations that `pf stubgen
 * --lang ts` writes for a module's functions). PackedFunction is any one.
 */
export interface TypedFunction<A extends unknown[], R> {
  (...args: A): R;
  readonly handle: number;
  readonly name: string;
  readonly signature: string | null;
  readonly doc: string | null;
  /** Records metadata (each field once). */
  setInfo(info: { name?: string; signature?: string; doc?: string }): this;
  /** The call on a worker thread; the event loop stays free for callbacks from C threads. */
  callAsync(...args: A): Promise<R>;
  /** Releases the reference now, or when the outermost synchronous call in progress ends (idempotent). */
  dispose(): void;
  [Symbol.dispose](): void;
}
/** A packed function: callable, with its metadata. */
export interface PackedFunction extends TypedFunction<Value[], any> {}
export const PackedFunction: { prototype: PackedFunction; [Symbol.hasInstance](x: unknown): boolean };

/** A reference-counted packedfunc object other than a function. */
export class PackedObject {
  protected constructor();
  readonly handle: number;
  readonly typeIndex: number;
  readonly typeName: string;
  dispose(): void;
  [Symbol.dispose](): void;
}

export class PackedArray extends PackedObject implements Iterable<any> {
  readonly length: number;
  at(index: number): any;
  get(index: number): any;
  toArray(): any[];
  [Symbol.iterator](): Iterator<any>;
}

export class PackedMap extends PackedObject implements Iterable<[any, any]> {
  readonly size: number;
  get(key: string | number | bigint): any;
  has(key: string | number | bigint): boolean;
  keys(): IterableIterator<any>;
  values(): IterableIterator<any>;
  entries(): IterableIterator<[any, any]>;
  toObject(): Record<string, any>;
  toMap(): Map<any, any>;
  [Symbol.iterator](): Iterator<[any, any]>;
}

export class Shape extends PackedObject implements Iterable<number | bigint> {
  static of(dims: Iterable<number | bigint>): Shape;
  readonly dims: readonly (number | bigint)[];
  readonly length: number;
  at(index: number): number | bigint | undefined;
  toArray(): (number | bigint)[];
  [Symbol.iterator](): Iterator<number | bigint>;
}

export class List extends PackedObject implements Iterable<any> {
  static of(items?: Iterable<Value>): List;
  readonly length: number;
  get(index: number): any;
  at(index: number): any;
  set(index: number, value: Value): void;
  push(...values: Value[]): number;
  append(value: Value): void;
  insert(index: number, value: Value): void;
  pop(index?: number): any;
  clear(): void;
  toArray(): any[];
  [Symbol.iterator](): Iterator<any>;
}

export class Dict extends PackedObject implements Iterable<[any, any]> {
  static of(entries?: Map<any, Value> | [any, Value][] | Record<string, Value>): Dict;
  readonly size: number;
  get(key: Value): any;
  has(key: Value): boolean;
  set(key: Value, value: Value): this;
  pop(key: Value): any;
  delete(key: Value): boolean;
  clear(): void;
  keys(): IterableIterator<any>;
  values(): IterableIterator<any>;
  entries(): IterableIterator<[any, any]>;
  toObject(): Record<string, any>;
  toMap(): Map<any, any>;
  [Symbol.iterator](): Iterator<[any, any]>;
}

/**
 * A module: its functions are properties by their dotted names (mod.demo.add).
 * Types: its object types' classes by key (those `pf stubgen --lang ts` declares).
 */
export class Module<Types extends object = Record<string, ObjectClass>> extends PackedObject {
  readonly path: string | null;
  readonly types: Types;
  listFunctionNames(): string[];
  get(name: string, options?: { queryImports?: boolean; allowMissing?: boolean }): PackedFunction;
  exportGlobal(prefix?: string, options?: { override?: boolean; protected?: boolean }): string[];
  [name: string]: any;
}

/** A field of a registered object type, in its class's typeInfo. */
export interface TypeField {
  readonly name: string;
  /** The canonical type of the signature grammar: "int64", "list<str>", "optional<obj<mylib.Node>>". */
  readonly type: string;
  readonly writable: boolean;
  readonly doc: string | null;
  /** The key of the type that declares it. */
  readonly declaredBy: string;
}

/** A method of a registered object type, in its class's typeInfo. */
export interface TypeMethod {
  readonly name: string;
  /** Canonical, the object first for an instance method; null for a packed method given none. */
  readonly signature: string | null;
  readonly static: boolean;
  readonly doc: string | null;
  readonly declaredBy: string;
}

/** What the library knows of a registered object type (Python's __pf_type_info__). */
export interface TypeInfo {
  readonly key: string;
  readonly index: number;
  /** The parent's key, or null. */
  readonly parent: string | null;
  readonly doc: string | null;
  /** Own and inherited, as the library lists them. */
  readonly fields: readonly TypeField[];
  /** Own and inherited; the constructor is not among them. */
  readonly methods: readonly TypeMethod[];
  /** The constructor's signature; null without one. */
  readonly initSignature: string | null;
}

/** The class of a registered object type. */
export interface ObjectClass {
  new (...args: Value[]): PackedObject & Record<string, any>;
  readonly typeKey: string;
  readonly typeIndex: number;
  readonly doc?: string;
  readonly typeInfo: TypeInfo;
  [staticMethod: string]: any;
}

export class DataType {
  constructor(dtype: string | DataType);
  constructor(code: number, bits: number, lanes?: number);
  readonly code: number;
  readonly bits: number;
  readonly lanes: number;
  readonly itemsize: number;
  equals(other: DataType | string): boolean;
  toString(): string;
}

export class Device {
  constructor(deviceType: string | number | Device, deviceId?: number);
  readonly deviceType: number;
  readonly deviceId: number;
  readonly typeName: string;
  equals(other: Device): boolean;
  toString(): string;
}

export class OpaqueHandle {
  constructor(address: bigint | number);
  readonly address: bigint;
}

/** A tensor result: a typed array over the tensor's memory, with its layout. */
export type TensorView = (
  Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array |
  Float32Array | Float64Array | BigInt64Array | BigUint64Array
) & {
  readonly shape: number[];
  readonly dtype: DataType;
  readonly device: Device;
  readonly strides: number[];
};

/** A tensor argument: a typed array with a shape and a dtype, made by tensor(). */
export interface TensorArg {
  readonly data: ArrayBufferView;
  readonly shape: number[];
  readonly dtype: DataType;
}

/** A C error of a kind that has no JavaScript class of its own. */
export class PackedFuncError extends Error {
  constructor(message: string, kind?: string);
  kind: string;
  cTraceback: string[];
}
export class FunctionNotFoundError extends PackedFuncError {}

export function getGlobalFunc(name: string): PackedFunction;
export function getGlobalFunc(name: string, options: { allowMissing: true }): PackedFunction | null;
export function registerFunc<F extends (...args: any[]) => any>(
  name: string, fn: F, options?: { override?: boolean; protected?: boolean }): F;
export function removeGlobalFunc(name: string): void;
export function listGlobalFuncNames(prefix?: string): string[];
export function initApi<T extends object = Record<string, PackedFunction>>(prefix: string, target?: T): T;
/** M: the module's type, as `pf stubgen --lang ts` declares it (LoadedModule). */
export function loadModule<M extends Module<object> = Module>(path: string): M;
export function convert(value: Value): any;
export function tensor(data: ArrayBufferView, shape?: number[], dtype?: string | DataType): TensorArg;
export function getObjectType(key: string): ObjectClass;
/** The keys of every registered object type, in the order of registration. */
export function registeredTypes(): string[];
/**
 * The JSON text of a value (the C serializer's document, serialize.h): containers,
 * tensors and instances of registered types (by type key and fields), sharing and
 * cycles kept.
 */
export function toJSON(value: Value): string;
/** The value a text of toJSON describes: a new graph, each instance of the registered type of its key. */
export function fromJSON(text: string): any;
export function registerError(kind: string, cls: new (message: string) => Error): typeof cls;
/** How long a C thread waits while the JavaScript thread is blocked in one synchronous call (-1: forever); returns the previous value. */
export function setThreadCallTimeout(ms: number): number;
/** How many JavaScript values C holds now. */
export function heldCount(): number;
export const libraryVersion: string;
export const libraryPath: string;
export const version: string;
