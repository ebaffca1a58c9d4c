/*
 * The blob embedded in flash by the assembler (`.incbin` of MFC_BLOB_PATH, a string given at build
 * time), 4-byte aligned, between mfc_blob_start and mfc_blob_end. Included once per program.
 */
#ifndef MFC_FIRMWARE_BLOB_H
#define MFC_FIRMWARE_BLOB_H

#include <stdint.h>

#ifndef MFC_BLOB_PATH
#error "MFC_BLOB_PATH must name the blob to embed"
#endif

__asm__(".section .rodata.mfc_blob,\"a\"\n"
        ".balign 4\n"
        ".global mfc_blob_start\n"
        "mfc_blob_start:\n"
        ".incbin \"" MFC_BLOB_PATH "\"\n"
        ".global mfc_blob_end\n"
        "mfc_blob_end:\n"
        ".previous\n");
extern const uint8_t mfc_blob_start[], mfc_blob_end[];

#endif
