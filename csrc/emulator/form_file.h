/* httpd.decode_form_file: a form body decoded from its file (form_file.c). */
#ifndef GEOSERVICES_EMULATOR_FORM_FILE_H
#define GEOSERVICES_EMULATOR_FORM_FILE_H

#include <lua.h>

/* Sets decode_form_file in the table on the stack top (the httpd module). */
void geoservices_open_form_file(lua_State *L);

#endif
