/* Test fixture: an ordinary shared library without registrations. */
int mod_plain_answer(void);
int mod_plain_answer(void) { return 42; }
