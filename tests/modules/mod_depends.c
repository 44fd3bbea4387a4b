/* Test fixture: a library without registrations of its own that links
 * against a module (mod_basic.so); it is not a module itself. */
int mod_depends_answer(void);
int mod_depends_answer(void) { return 7; }
