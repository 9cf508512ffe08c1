-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "announcementTs" TEXT;

