# Turns a text file into a C array: cmake -DIN=file -DOUT=file.c -P embed.cmake
# The array is named after the file (schema.sql -> schema_sql).
get_filename_component(name ${IN} NAME)
string(REGEX REPLACE "[^A-Za-z0-9]" "_" name ${name})
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes ${hex})
file(WRITE ${OUT} "/* generated from ${name}; do not edit */\nconst char ${name}[] = {${bytes}0x00};\n")
